// The answers of the service's unary calls, as plain functions of the shared state (no gRPC
// types): Tokenize and Detokenize, GetModelInfo, GetServerInfo.
#ifndef TANDEM_SERVER_GRPC_INFO_H_
#define TANDEM_SERVER_GRPC_INFO_H_

#include "absl/status/status.h"
#include "server/grpc/service_state.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

absl::Status TokenizeText(const ServiceState& state, const v1::TokenizeRequest& request,
                          v1::TokenizeResponse* response);
absl::Status DetokenizeIds(const ServiceState& state, const v1::DetokenizeRequest& request,
                           v1::DetokenizeResponse* response);
void FillModelInfo(const ServiceState& state, v1::ModelInfo* info);
void FillServerInfo(ServiceState& state, v1::ServerInfo* info);

// The version reported by GetServerInfo.
inline constexpr const char* kServerVersion = "0.1.0";

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_INFO_H_
