// A small command-line parser for the subcommands: `--name value`, `--name=value` and boolean
// `--name`. Unknown flags, missing values and malformed numbers are errors that name the flag.
#ifndef TANDEM_SERVER_CLI_ARGS_H_
#define TANDEM_SERVER_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::cli {

struct FlagSpec {
  std::string name;  // without the leading dashes
  bool takes_value = true;
  std::string help;
};

class Args {
 public:
  // argv[0] is the subcommand name; flags follow.
  static absl::StatusOr<Args> Parse(int argc, char** argv, const std::vector<FlagSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // Sets a flag the command line did not give (config_sources.h fills them from the
  // environment and a config file); a flag already set keeps its value. `source` names where
  // the value came from in error messages, e.g. "TANDEM_PORT" or "serve.conf:3".
  void SetIfAbsent(const std::string& name, std::string value, std::string source) {
    if (values_.emplace(name, std::move(value)).second) sources_[name] = std::move(source);
  }
  // Where a flag's value came from: "--name" for the command line.
  std::string Source(const std::string& name) const;
  std::optional<std::string> String(const std::string& name) const;
  absl::StatusOr<std::optional<int64_t>> Int(const std::string& name) const;
  // An integer flag in [lo, hi], or `fallback` when absent; out of range is InvalidArgument
  // naming the flag and the range.
  absl::StatusOr<int64_t> IntIn(const std::string& name, int64_t lo, int64_t hi,
                                int64_t fallback) const;
  absl::StatusOr<std::optional<double>> Double(const std::string& name) const;
  // A comma-separated list of integers, e.g. "1,2,3".
  absl::StatusOr<std::optional<std::vector<int64_t>>> IntList(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> sources_;  // flags not from the command line
};

// "Usage: tandem NAME [flags]" followed by one line per flag.
std::string Usage(const std::string& command, const std::string& synopsis,
                  const std::vector<FlagSpec>& specs);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_ARGS_H_
