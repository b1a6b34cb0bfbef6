// How far one model's predictions are from another's on a text: the same checkpoint in another
// weight format (bf16, int8), another backend or a changed kernel, against a reference. A
// perplexity alone hides most of such a change (errors in both directions cancel out); the
// divergence of the whole next-token distribution at every scored position, and how often the
// most likely token stays the same, show it (as llama.cpp's --kl-divergence does).
#ifndef TANDEM_ENGINE_MODEL_COMPARISON_H_
#define TANDEM_ENGINE_MODEL_COMPARISON_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/perplexity.h"
#include "engine/scored_windows.h"

namespace tandem::engine {

struct ModelComparison {
  // Each model's perplexity on the same windows.
  PerplexityResult reference;
  PerplexityResult compared;
  // KL(P_reference ‖ P_compared) in nats at each scored token, in window and position order
  // (summed in that order too, so that nothing depends on the batch).
  std::vector<float> divergences;
  double divergence_sum = 0;
  double divergence_square_sum = 0;
  // Scored positions where both models' most likely next token is the same.
  int64_t same_top_token = 0;

  double mean_divergence() const;
  double mean_divergence_stderr() const;  // of the mean, over tokens
  // The q-quantiles (q in [0, 1]) of the per-token divergences, nearest rank; 0 when there are
  // none. One sort for all of them.
  std::vector<double> divergence_quantiles(std::span<const double> qs) const;
  double divergence_quantile(double q) const { return divergence_quantiles({&q, 1})[0]; }
  double same_top_token_rate() const;
};

// KL(P ‖ Q) in nats between the softmax distributions of two rows of logits of the same
// vocabulary, in double: Σ p · (log p − log q).
double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits);

// The lowest id among a row's largest logits.
int32_t TopToken(std::span<const float> logits);

// Called after each group of windows: windows done, of how many, both models' perplexity so far
// and the comparison's divergences so far (its `reference` and `compared` are filled at the end).
using ComparisonProgress =
    std::function<void(size_t done, size_t total, double reference_perplexity,
                       double compared_perplexity, const ModelComparison& so_far)>;

// Scores `text` with both models in lockstep (ScoreWindows: the same windows and passes; each
// allocator holds options.batch windows) and compares them at every scored position.
// INVALID_ARGUMENT as MeasurePerplexity, or for models whose vocabularies differ; INTERNAL
// naming the model whose logits are not finite, or the position where the compared model gives
// no probability to a token the reference can produce (an infinite divergence).
absl::StatusOr<ModelComparison> CompareModels(const ScoringModel& reference,
                                              const ScoringModel& compared,
                                              std::span<const int32_t> text,
                                              const PerplexityOptions& options,
                                              const ComparisonProgress& progress = {});

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_MODEL_COMPARISON_H_
