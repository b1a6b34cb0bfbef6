// The frame of a one-shot subcommand: parse its flags, answer --help, read its settings, run it,
// and turn the outcome into the exit code the `tandem` binary promises (commands.h): 0 done,
// 1 a failure while running, 2 bad usage (with the usage text).
#ifndef TANDEM_SERVER_CLI_COMMAND_MAIN_H_
#define TANDEM_SERVER_CLI_COMMAND_MAIN_H_

#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/cli/args.h"

namespace tandem::cli {

template <class Settings>
int RunCommand(const std::string& name, const std::string& synopsis,
               const std::vector<FlagSpec>& flags, int argc, char** argv,
               absl::StatusOr<Settings> (*read)(const Args&),
               absl::Status (*run)(const Settings&)) {
  absl::StatusOr<Args> args = Args::Parse(argc, argv, flags);
  if (args.ok() && args->Has("help")) {
    std::cout << Usage(name, synopsis, flags);
    return 0;
  }
  absl::StatusOr<Settings> settings =
      args.ok() ? read(*args) : absl::StatusOr<Settings>(args.status());
  if (!settings.ok()) {
    std::cerr << "tandem " << name << ": " << settings.status().message() << "\n\n"
              << Usage(name, synopsis, flags);
    return 2;
  }
  if (absl::Status status = run(*settings); !status.ok()) {
    std::cerr << "tandem " << name << ": " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_COMMAND_MAIN_H_
