// Perplexity of a model on a text: how well it predicts each token from the ones before it,
// exp(mean negative log-likelihood). It is what tells whether a weight format (bf16, int8) or a
// kernel change made the model worse, on text rather than on one logit row at a time.
//
// The text's tokens are cut into consecutive, non-overlapping windows, each run as its own
// sequence from an empty state, optionally behind a prefix (the BOS a tokenizer puts before
// plain text). In each window the tokens before `score_from` are context only, and every later
// one is scored: log_softmax of the logits after the token before it, as prompt logprobs
// compute it (kernels::ComputeLogprobs), so a scored token's logprob is exactly what a server
// request scoring the same window reports (on the same backend, batch-invariant kernels). With
// score_from at half the window (the default) every scored token has at least that much
// context, much as in llama.cpp's perplexity.
#ifndef TANDEM_ENGINE_PERPLEXITY_H_
#define TANDEM_ENGINE_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/block_allocator.h"
#include "kernels/ops.h"
#include "models/model.h"

namespace tandem::engine {

struct PerplexityOptions {
  // Tokens per window, the prefix included; 0: one window holding the whole text.
  int64_t context = 512;
  // Positions of a window (the prefix's included) that are context only: the first scored token
  // is the one at this position. -1: half the window (1 when the window is the whole text).
  int64_t score_from = -1;
  // Windows run side by side in one forward pass (the results do not depend on it).
  int32_t batch = 1;
  // Tokens of each window per forward pass: the logits of a pass take batch × chunk rows of
  // vocab floats.
  int64_t chunk = 512;
  // Put before each window's text tokens (usually {BOS}); counts toward `context`.
  std::vector<int32_t> prefix;
};

// One window: text tokens [begin, begin + text_tokens), and the sum of its scored tokens'
// negative log-likelihoods (natural log).
struct WindowScore {
  int64_t begin = 0;
  int64_t text_tokens = 0;
  int64_t scored_tokens = 0;
  int64_t tokens_run = 0;  // through the model, context and prefixes included
  double nll_sum = 0;
};

struct PerplexityResult {
  std::vector<WindowScore> windows;
  int64_t context = 0;     // the window size used (the whole text's when options.context is 0)
  int64_t score_from = 0;  // as resolved
  int64_t scored_tokens = 0;
  int64_t tokens_run = 0;  // through the model, context and prefixes included
  double nll_sum = 0;
  double nll_square_sum = 0;  // of each scored token's NLL, for the standard error

  double mean_nll() const;
  double perplexity() const;  // exp(mean_nll)
  // The standard error of the mean NLL over tokens, and so of the perplexity (its derivative
  // times that): treats tokens as independent, so it understates the spread between texts.
  double mean_nll_stderr() const;
  double perplexity_stderr() const;
};

// The window size and first scored position `options` resolve to for a text of `text_tokens`
// tokens, or INVALID_ARGUMENT naming what is wrong.
struct PerplexityWindows {
  int64_t context = 0;
  int64_t score_from = 0;
  int64_t count = 0;  // windows with at least one scored token
};
absl::StatusOr<PerplexityWindows> PlanPerplexityWindows(int64_t text_tokens,
                                                        const PerplexityOptions& options);

// Adds up the scored tokens of a run into a PerplexityResult (MeasurePerplexity's, and each
// model's in a comparison, model_comparison.h), window by window in window order, so that the
// sums do not depend on how windows were batched.
class PerplexityTally {
 public:
  PerplexityTally(const PerplexityWindows& plan, const PerplexityOptions& options,
                  int64_t text_tokens);
  // The token at `position` of window `window`, scored from `logits` (the row before it).
  // INTERNAL when its log-probability is not finite.
  absl::Status Add(int64_t window, int64_t position, int32_t token, std::span<const float> logits);
  // Windows [0, windows_done) are complete; `tokens_run` the tokens run so far.
  void CompleteWindows(int64_t windows_done, int64_t tokens_run);
  const PerplexityResult& result() const { return result_; }

 private:
  const int64_t prefix_;
  std::vector<WindowScore> windows_;
  std::vector<double> square_sums_;  // each window's Σ NLL²
  int64_t added_ = 0;
  PerplexityResult result_;
};

// Called after each group of windows: windows done so far, of how many, and the running result.
using PerplexityProgress = std::function<void(size_t done, size_t total, const PerplexityResult&)>;

// Scores `text` (token ids in [0, vocab)). `allocator` must hold options.batch sequences of a
// window's positions (ArenaForSequences(model, batch, PlanPerplexityWindows(...)->context)).
// INVALID_ARGUMENT names a bad option, a token outside the vocabulary or a text too short to
// score anything.
absl::StatusOr<PerplexityResult> MeasurePerplexity(const models::Model& model, kernels::Ops& ops,
                                                   cache::BlockAllocator& allocator,
                                                   std::span<const int32_t> text,
                                                   const PerplexityOptions& options,
                                                   const PerplexityProgress& progress = {});

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_PERPLEXITY_H_
