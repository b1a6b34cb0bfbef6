// Flags for speculative decoding (engine::SpeculationConfig), shared by serve and bench-engine.
#ifndef TANDEM_SERVER_CLI_SPECULATION_FLAGS_H_
#define TANDEM_SERVER_CLI_SPECULATION_FLAGS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/scheduler.h"
#include "server/cli/args.h"

namespace tandem::cli {

// `flags` with --speculative-tokens, --prompt-lookup, --prompt-lookup-min-match and
// --speculative-max-batch added before --help (or at the end).
std::vector<FlagSpec> WithSpeculationFlags(std::vector<FlagSpec> flags);
// The configuration the flags ask for; InvalidArgument naming the flag for a value out of range
// or a lookup flag without drafts to use it.
absl::StatusOr<engine::SpeculationConfig> ReadSpeculation(const Args& args);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_SPECULATION_FLAGS_H_
