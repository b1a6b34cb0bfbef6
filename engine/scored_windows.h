// The passes behind perplexity and model comparison (perplexity.h, model_comparison.h): a text's
// windows run through one or more models in lockstep, the same tokens in the same passes, and
// each scored position handed over with every model's row of logits before it.
#ifndef TANDEM_ENGINE_SCORED_WINDOWS_H_
#define TANDEM_ENGINE_SCORED_WINDOWS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "cache/block_allocator.h"
#include "engine/perplexity.h"
#include "kernels/ops.h"
#include "models/model.h"

namespace tandem::engine {

// A model that runs the windows, with its backend and the memory for options.batch windows.
struct ScoringModel {
  const models::Model* model = nullptr;
  kernels::Ops* ops = nullptr;
  cache::BlockAllocator* allocator = nullptr;
  std::string name;  // how errors name it beside another ("the int8 model"); may be empty
};

// One scored position: the token at `position` of window `window` (the prefix's positions
// included), and each model's logits row after the tokens before it (vocabulary floats, valid
// during the call).
struct ScoredRow {
  int64_t window = 0;
  int64_t position = 0;
  int32_t token = 0;
  std::span<const float* const> logits;  // one per model, in `models` order
};

// Runs `plan`'s windows of `text` through every model, options.batch windows at a time, and
// calls `on_row` for each scored position: a window's in position order, but the windows of a
// group interleave pass by pass (sum per window to stay independent of the batch); then
// `on_group` after each group (windows done so far, tokens run through each model so far). The
// models must share the vocabulary; the text's and the prefix's ids must be in it
// (CheckScoringInput). An error from a model names the window (and the model, when it has a name);
// one from `on_row` is returned as it is.
absl::Status ScoreWindows(
    std::span<const ScoringModel> models, std::span<const int32_t> text,
    const PerplexityOptions& options, const PerplexityWindows& plan,
    const std::function<absl::Status(const ScoredRow&)>& on_row,
    const std::function<void(int64_t windows_done, int64_t tokens_run)>& on_group);

// INVALID_ARGUMENT naming the first prefix or text id outside [0, vocab).
absl::Status CheckScoringInput(std::span<const int32_t> text, std::span<const int32_t> prefix,
                               int32_t vocab);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_SCORED_WINDOWS_H_
