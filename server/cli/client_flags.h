// The flags every client subcommand (`tandem chat`, `tandem bench`) takes to reach a server:
// --address, and the counterparts of `tandem serve`'s --tls-cert/--tls-key and --auth-token.
#ifndef TANDEM_SERVER_CLI_CLIENT_FLAGS_H_
#define TANDEM_SERVER_CLI_CLIENT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/cli/args.h"
#include "server/client/client_security.h"

namespace tandem::cli {

// Read when --token is absent, so that the token need not appear in `ps` output or shell history.
inline constexpr char kTokenEnvironmentVariable[] = "TANDEM_TOKEN";

// --address, --tls-ca, --tls-server-name, --token.
std::vector<FlagSpec> ClientFlags();

struct ClientTarget {
  std::string address;
  client::ClientSecurity security;
};

absl::StatusOr<ClientTarget> ReadClientTarget(const Args& args);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_CLIENT_FLAGS_H_
