// Request::checkpoint_hints: where a request's prompt is expected to be branched from by later
// requests (chat message boundaries). The server computes them; the engine checks them here
// before a request is queued, so the scheduler and the prefix cache can rely on their shape.
#ifndef TANDEM_ENGINE_CHECKPOINT_HINTS_H_
#define TANDEM_ENGINE_CHECKPOINT_HINTS_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"

namespace tandem::engine {

// INVALID_ARGUMENT naming the offending entry unless `hints` is strictly ascending, each in
// [1, prompt_tokens], and at most kMaxCheckpointHints long (engine/request.h).
[[nodiscard]] absl::Status ValidateCheckpointHints(const std::vector<size_t>& hints,
                                                   size_t prompt_tokens);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_CHECKPOINT_HINTS_H_
