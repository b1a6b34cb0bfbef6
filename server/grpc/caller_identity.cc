#include "server/grpc/caller_identity.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tandem::server {

std::string PeerHost(absl::string_view peer) {
  if (absl::ConsumePrefix(&peer, "ipv4:")) {
    return std::string(peer.substr(0, peer.rfind(':')));
  }
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    absl::ConsumePrefix(&peer, "[");
    return std::string(peer.substr(0, peer.find(']')));
  }
  return std::string(peer);
}

absl::StatusOr<std::string> IdentifyCaller(std::optional<absl::string_view> authorization,
                                           absl::string_view peer_host,
                                           const BearerTokens& tokens) {
  if (!tokens.enabled()) return absl::StrCat("peer:", peer_host);
  absl::StatusOr<std::string> name = tokens.Authenticate(authorization);
  if (!name.ok()) return name.status();
  return absl::StrCat("token:", *name);
}

absl::StatusOr<std::string> IdentifyCaller(const grpc::ServerContextBase& context,
                                           const BearerTokens& tokens) {
  const auto& metadata = context.client_metadata();
  std::optional<absl::string_view> header;
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    header = absl::string_view(it->second.data(), it->second.size());
  }
  return IdentifyCaller(header, PeerHost(context.peer()), tokens);
}

}  // namespace tandem::server
