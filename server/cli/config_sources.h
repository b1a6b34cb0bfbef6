// Where a subcommand's settings come from besides its command line, in order of precedence:
//   1. flags on the command line;
//   2. environment variables TANDEM_<FLAG>, upper case with '-' as '_' (TANDEM_MEMORY_GIB=2);
//   3. a config file (--config FILE or TANDEM_CONFIG) of `flag = value` lines, e.g.
//        # tandem serve settings
//        memory-gib = 2
//        cache-policy = "marconi"
//        no-metrics = true
// Boolean flags take true/false (also 1/0, yes/no). Unknown names in the file, malformed lines
// and bad boolean values are errors naming the variable or file:line; an unknown TANDEM_*
// variable is left alone (other tools, the clients among them, read their own).
#ifndef TANDEM_SERVER_CLI_CONFIG_SOURCES_H_
#define TANDEM_SERVER_CLI_CONFIG_SOURCES_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/cli/args.h"

namespace tandem::cli {

// Looks up an environment variable; std::getenv by default, replaceable in tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnvironment();

// "memory-gib" -> "TANDEM_MEMORY_GIB".
std::string EnvironmentName(const std::string& flag);

// Fills every flag in `specs` that `args` lacks, from the environment and then from the config
// file named by the "config" flag (itself from the command line or TANDEM_CONFIG), if any.
// `specs` must contain {"config", true, ...} for the file to be read.
absl::Status FillFromEnvironmentAndFile(const std::vector<FlagSpec>& specs, const EnvLookup& env,
                                        Args* args);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_CONFIG_SOURCES_H_
