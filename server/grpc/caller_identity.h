// Who is calling: the caller a call's bearer token names when the server has tokens (a call
// without a valid one is refused with UNAUTHENTICATED), else the peer's address without its port
// (no proof of anything, but enough to keep two hosts' request ids apart). Request ids live in
// one namespace per caller (service_state.h), so a client can neither abort nor probe another
// caller's requests. Health and reflection do not ask.
#ifndef TANDEM_SERVER_GRPC_CALLER_IDENTITY_H_
#define TANDEM_SERVER_GRPC_CALLER_IDENTITY_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "server/util/bearer_tokens.h"

namespace tandem::server {

// "token:NAME" for a valid token, "peer:HOST" without tokens; UNAUTHENTICATED saying what was
// wrong otherwise.
absl::StatusOr<std::string> IdentifyCaller(const grpc::ServerContextBase& context,
                                           const BearerTokens& tokens);
// The same for any transport: its Authorization header, if any, and the peer's host.
absl::StatusOr<std::string> IdentifyCaller(std::optional<absl::string_view> authorization,
                                           absl::string_view peer_host,
                                           const BearerTokens& tokens);

// gRPC's peer string without the port: "ipv4:10.0.0.7:5123" -> "10.0.0.7",
// "ipv6:[::1]:5123" -> "::1", "unix:/run/t.sock" -> "unix:/run/t.sock".
std::string PeerHost(absl::string_view peer);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_CALLER_IDENTITY_H_
