// `tandem simulate` and `tandem simulate-alloc`: the prefix-cache and allocator simulators of
// cache/ behind a stable command line (external checks depend on the flag names and on the
// keys printed). argv[0] is the subcommand name. Exit codes: 0 success, 1 runtime failure,
// 2 bad usage (the error goes to stderr).
//
//   tandem simulate (--trace FILE | --workload NAME) [--seed S] --model-spec NAME|DIR
//                   --capacity-gb X --policy none|vllm-plus|sglang-plus|marconi [--alpha A]
//                   [--json] [--per-request-out FILE] [--bootstrap-multiplier K]
//                   [--sessions N] [--sessions-per-second R]
//   tandem simulate-alloc --workload NAME
//                   --allocator padded-unified|fixed-dual:R|avmp-static:R|avmp-dynamic
//                   --pool-gib G --model-spec NAME [--seed S] [--json]
#ifndef TANDEM_SERVER_CLI_SIMULATE_COMMAND_H_
#define TANDEM_SERVER_CLI_SIMULATE_COMMAND_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "cache/model_spec.h"

namespace tandem::cli {

int RunSimulate(int argc, char** argv);
int RunSimulateAlloc(int argc, char** argv);

// How --model-spec DIR is turned into a ModelSpec (engine/ maps a model's config.json). Until
// one is installed, only the built-in names are accepted.
using ModelDirLoader = std::function<absl::StatusOr<cache::ModelSpec>(const std::string& dir)>;
void SetModelDirLoader(ModelDirLoader loader);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_SIMULATE_COMMAND_H_
