// The host's sampling rule, the one every backend's Ops::ReadBackSampled must follow:
//   1. greedy: the argmax of the row (kernels::ArgmaxRow); otherwise
//   2. a row with a NaN, or whose largest logit is not finite, also gives its argmax; otherwise
//   3. weights exp((logit - max) / temperature), cut to the top_k most likely, then to the
//      shortest head whose probability reaches top_p, then to the weights >= min_p (relative to
//      the largest, which weighs 1): each cut ranks the tokens from the most likely down, lower
//      ids first among equals. Then one draw: a walk over the candidates in id order stops where
//      the running weight exceeds uniform × their total. (Walking in id order lets a device draw
//      without sorting: kernels/threshold_draw.h.)
// Penalties are applied first, to a copy of the row (kernels::PenalisedLogit).
// Scratch grows to the longest row seen and is reused, so a step allocates nothing once the
// first row of each kind (penalised or not) has been drawn. Not thread-safe: one per thread that
// samples.
#ifndef TANDEM_KERNELS_ROW_SAMPLER_H_
#define TANDEM_KERNELS_ROW_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/sampling_row.h"

namespace tandem::kernels {

// A candidate's unnormalised probability, exp((logit - max) / temperature) given 1/temperature,
// to float accuracy: the largest logit weighs exactly 1, logits more than ~87 temperatures below
// it weigh 0. FastExp rather than libm's exp in double, so that the loop over a whole vocabulary
// vectorises (libm's exp was 60% of a row's time). A device computes the same with its expf.
inline float CandidateWeight(float logit, float max_logit, double inv_t) {
  return FastExp(static_cast<float>((static_cast<double>(logit) - max_logit) * inv_t));
}

// A row's penalty tokens in a read-back's table: seen[rule.penalties_begin, penalties_end), or
// none when that range does not lie within the table.
inline std::span<const PenaltyToken> PenaltyTokensOf(const SamplingRow& rule,
                                                     std::span<const PenaltyToken> seen) {
  if (rule.penalties_begin < 0 || rule.penalties_end < rule.penalties_begin ||
      static_cast<size_t>(rule.penalties_end) > seen.size()) {
    return {};
  }
  return seen.subspan(static_cast<size_t>(rule.penalties_begin),
                      static_cast<size_t>(rule.penalties_end - rule.penalties_begin));
}

class RowSampler;

// Row r of a sampling read-back (Ops::ReadBackSampled: rows of `cols` logits at stride ld_src)
// as `sampler` samples it under rules[r].
SampledToken SampleReadBackRow(RowSampler& sampler, const float* src, int64_t ld_src, int64_t cols,
                               std::span<const SamplingRow> rules,
                               std::span<const PenaltyToken> seen, size_t r);

class RowSampler {
 public:
  // Sizes the scratch for rows of `vocab` logits up front.
  explicit RowSampler(int64_t vocab = 0);

  // The token `rule` draws from `logits` (penalties already applied; an empty row gives 0).
  int32_t Draw(std::span<const float> logits, const SamplingRow& rule);
  // Applies the row's penalty tokens to a copy of `logits`, then draws from it; adds the
  // logprobs the rule asks for, of `logits` as given (kernels/logprobs.h).
  SampledToken Sample(std::span<const float> logits, const SamplingRow& rule,
                      std::span<const PenaltyToken> seen);
  // The copy Sample draws from: `logits` itself when the rule has no active penalty. Valid until
  // the next call.
  std::span<const float> Penalised(std::span<const float> logits, const PenaltyParams& penalties,
                                   std::span<const PenaltyToken> seen);

  // What Draw would draw from, as (token, probability) pairs in the order the draw walks them (by
  // id); greedy and degenerate rows give their argmax with probability 1. For tests and debugging;
  // allocates.
  std::vector<std::pair<int32_t, double>> Distribution(std::span<const float> logits,
                                                       const SamplingRow& rule);

 private:
  // The k most likely ids, most likely first and lower ids first among equals, into
  // order_[0, k); returns k, or nothing when the row holds a NaN.
  std::optional<size_t> TopK(std::span<const float> logits, size_t k);
  // Fills order_[0, n) with the candidates of the row in id order, weight_of_[id] with their
  // weights, and returns n; nothing when the row holds a NaN or its largest logit is not finite
  // (no weight can be relative to it): the row then gives its argmax.
  std::optional<size_t> Candidates(std::span<const float> logits, const SamplingRow& rule);

  // Of order_[0, n) in rank order: how many to keep so that their weight reaches `target`.
  size_t CutWalking(size_t n, double target) const;
  // The same for order_[0, n) in any order: leaves the kept tokens first (in no order) and
  // returns their count.
  size_t KeepHeadReaching(std::span<const float> logits, size_t n, double target);
  // Sorts order_[0, n) by id.
  void IdOrder(size_t n);
  void Reserve(size_t cols);

  std::vector<float> penalised_;
  std::vector<int32_t> order_;
  std::vector<float> weight_of_;                 // by token id: every token's, or the top-k's
  std::vector<uint8_t> marks_;                   // IdOrder's, all zero between calls
  std::vector<std::pair<float, int32_t>> heap_;  // TopK's
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_ROW_SAMPLER_H_
