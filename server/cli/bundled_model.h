// Where the bundled model lives, for the subcommands that default to it (serve, generate).
#ifndef TANDEM_SERVER_CLI_BUNDLED_MODEL_H_
#define TANDEM_SERVER_CLI_BUNDLED_MODEL_H_

#include <string>

#include "absl/status/statusor.h"

namespace tandem::cli {

// bundled/tandem-tiny-chat, looked for beside the binary (build/release/tandem in a checkout,
// or bin/ next to share/tandem/ when installed) and then under the working directory.
// NOT_FOUND saying where it looked otherwise.
absl::StatusOr<std::string> BundledModelDir();

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_BUNDLED_MODEL_H_
