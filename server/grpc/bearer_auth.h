// The optional bearer token: when the server has one, every tandem.v1.Tandem call must carry
// the metadata "authorization: Bearer <token>" (the form grpcurl's -H and gRPC's access-token
// credentials send). Health and reflection do not ask for it.
#ifndef TANDEM_SERVER_GRPC_BEARER_AUTH_H_
#define TANDEM_SERVER_GRPC_BEARER_AUTH_H_

#include <string>

#include "grpcpp/server_context.h"

namespace tandem::server {

// OK when `expected` is empty or the call carries it; UNAUTHENTICATED saying what was wrong
// (no authorization metadata, not a bearer token, wrong token) otherwise.
grpc::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& expected);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_BEARER_AUTH_H_
