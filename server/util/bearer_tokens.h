// The bearer tokens a server accepts, each naming a caller. The name is who the server thinks it
// talks to: logs carry it, and request ids live in one namespace per caller, so that one client
// can neither abort nor probe another's requests (server/grpc/service_state.h).
//
// Token file format (--auth-token-file): one token per line, either `TOKEN` or `NAME:TOKEN`;
// blank lines and lines starting with '#' are ignored. A bare token is named "token-N" after its
// line (N counting from 1). Tokens are printable ASCII without spaces or ':' (RFC 6750's token68
// alphabet is a subset); names are 1..64 of [A-Za-z0-9._-].
#ifndef TANDEM_SERVER_UTIL_BEARER_TOKENS_H_
#define TANDEM_SERVER_UTIL_BEARER_TOKENS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::server {

class BearerTokens {
 public:
  BearerTokens() = default;  // accepts everyone: no token configured

  // One token, the caller named "default" (--auth-token).
  static absl::StatusOr<BearerTokens> Single(absl::string_view token);
  // The contents of a token file; errors name `source` and the line.
  static absl::StatusOr<BearerTokens> Parse(absl::string_view text, const std::string& source);

  bool enabled() const { return !entries_.empty(); }
  size_t size() const { return entries_.size(); }

  // The caller named by an HTTP/gRPC `authorization` header value ("Bearer TOKEN", scheme
  // case-insensitive); UNAUTHENTICATED saying what was wrong (missing header, another scheme,
  // unknown token). The comparison takes time that depends only on the given token's length
  // and the number of tokens, not on which token matched or how much of a guess was right.
  // Never call when !enabled().
  absl::StatusOr<std::string> Authenticate(std::optional<absl::string_view> header) const;

 private:
  struct Entry {
    std::string name;
    std::string token;
  };
  std::vector<Entry> entries_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_UTIL_BEARER_TOKENS_H_
