#include "server/cli/speculation_flags.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::cli {

std::vector<FlagSpec> WithSpeculationFlags(std::vector<FlagSpec> flags) {
  std::vector<FlagSpec> added = {
      {"speculative-tokens", true,
       "speculative decoding: the longest draft a sequence verifies per step, from a request's "
       "prediction (and with --prompt-lookup from its own text); the output is unchanged "
       "(default 4; 0 turns speculation off)"},
      {"prompt-lookup", false,
       "draft from the text the sequence has already seen (prompt and output), not only from "
       "predictions: faster where the output quotes or repeats, a verification pass wasted "
       "where it does not (default: off)"},
      {"prompt-lookup-min-match", true,
       "tokens at the end of the sequence that must match earlier text before it is followed "
       "(default 2)"},
      {"speculative-max-batch", true,
       "steps with more decoding sequences than this do not speculate (default 8)"},
  };
  auto help = std::find_if(flags.begin(), flags.end(),
                           [](const FlagSpec& flag) { return flag.name == "help"; });
  flags.insert(help, added.begin(), added.end());
  return flags;
}

absl::StatusOr<engine::SpeculationConfig> ReadSpeculation(const Args& args) {
  engine::SpeculationConfig config;
  TANDEM_ASSIGN_OR_RETURN(config.draft_tokens,
                          args.IntIn("speculative-tokens", 0, 64, config.draft_tokens));
  config.prompt_lookup = args.Has("prompt-lookup");
  TANDEM_ASSIGN_OR_RETURN(config.min_match,
                          args.IntIn("prompt-lookup-min-match", 1, 64, config.min_match));
  TANDEM_ASSIGN_OR_RETURN(config.max_batch,
                          args.IntIn("speculative-max-batch", 1, 65535, config.max_batch));
  if (config.draft_tokens == 0 && config.prompt_lookup) {
    return absl::InvalidArgumentError(absl::StrCat(args.Source("prompt-lookup"), " needs drafts: ",
                                                   args.Source("speculative-tokens"), " is 0"));
  }
  return config;
}

}  // namespace tandem::cli
