// The one place where absl::Status becomes grpc::Status (docs/ARCHITECTURE.md, "Conventions"):
// the canonical codes are the same numbers in both, so the code carries over and the message is
// kept verbatim.
#ifndef TANDEM_SERVER_GRPC_GRPC_STATUS_H_
#define TANDEM_SERVER_GRPC_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tandem::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_GRPC_STATUS_H_
