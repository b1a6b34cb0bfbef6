#include "server/cli/client_flags.h"

#include <cstdlib>

namespace tandem::cli {

std::vector<FlagSpec> ClientFlags() {
  return {
      {"address", true, "server address HOST:PORT (default 127.0.0.1:50051)"},
      {"tls-ca", true, "PEM CA certificate to verify the server with; enables TLS"},
      {"tls-server-name", true, "name to check the server's certificate against (TLS only)"},
      {"token", true, "bearer token sent with every call (default: $TANDEM_TOKEN)"},
  };
}

absl::StatusOr<ClientTarget> ReadClientTarget(const Args& args) {
  ClientTarget target;
  target.address = args.String("address").value_or("127.0.0.1:50051");
  if (target.address.empty()) return absl::InvalidArgumentError("--address must not be empty");
  target.security.tls_ca_file = args.String("tls-ca").value_or("");
  target.security.tls_server_name_override = args.String("tls-server-name").value_or("");
  if (!target.security.tls_server_name_override.empty() && target.security.tls_ca_file.empty()) {
    return absl::InvalidArgumentError("--tls-server-name needs --tls-ca");
  }
  if (std::optional<std::string> token = args.String("token")) {
    target.security.bearer_token = *token;
  } else if (const char* env = std::getenv(kTokenEnvironmentVariable); env != nullptr) {
    target.security.bearer_token = env;
  }
  return target;
}

}  // namespace tandem::cli
