#include "engine/checkpoint_hints.h"

#include "absl/strings/str_cat.h"
#include "engine/request.h"

namespace tandem::engine {

absl::Status ValidateCheckpointHints(const std::vector<size_t>& hints, size_t prompt_tokens) {
  if (hints.size() > kMaxCheckpointHints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint_hints: at most ", kMaxCheckpointHints, " positions, got ", hints.size()));
  }
  for (size_t i = 0; i < hints.size(); ++i) {
    if (hints[i] == 0 || hints[i] > prompt_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint_hints[", i, "]: position ",
                                                     hints[i], " is outside the prompt [1, ",
                                                     prompt_tokens, "]"));
    }
    if (i > 0 && hints[i] <= hints[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint_hints[", i, "]: positions must be strictly ascending, got ",
                       hints[i], " after ", hints[i - 1]));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine
