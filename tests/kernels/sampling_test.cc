// Sampling where the logits are: the host rule (RowSampler), the sort-free search a device runs
// (DrawByThresholds, here over a plain loop instead of a block of threads), and the backends'
// default read-back (Ops::ReadBackSampled).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/argmax.h"
#include "kernels/backends.h"
#include "kernels/logprobs.h"
#include "kernels/ops.h"
#include "kernels/row_sampler.h"
#include "kernels/sampling_row.h"
#include "kernels/threshold_draw.h"
#include "tests/kernels/batch_test_util.h"

namespace tandem::kernels {
namespace {

// DrawByThresholds' reductions as one loop each, in id order.
class SerialRow {
 public:
  explicit SerialRow(std::vector<float> weights)
      : w_(std::move(weights)), bits_(FixedWeightBits(static_cast<int64_t>(w_.size()))) {}
  int64_t cols() const { return static_cast<int64_t>(w_.size()); }
  template <class Keep>
  uint64_t Sum(Keep keep, bool count) {
    uint64_t total = 0;
    for (int32_t i = 0; i < static_cast<int32_t>(w_.size()); ++i) {
      if (keep(WeightKey(w_[i]), i)) total += count ? 1 : FixedWeight(w_[i], bits_);
    }
    return total;
  }
  template <class Keep, class Bucket>
  const uint64_t* BucketSums(Keep keep, bool count, Bucket bucket) {
    for (uint64_t& sum : sums_) sum = 0;
    for (int32_t i = 0; i < static_cast<int32_t>(w_.size()); ++i) {
      const uint32_t key = WeightKey(w_[i]);
      if (keep(key, i)) sums_[bucket(key, i)] += count ? 1 : FixedWeight(w_[i], bits_);
    }
    return sums_;
  }
  template <class Keep>
  int32_t MaxId(Keep keep) {
    int32_t best = -1;  // none kept: what a device's maximum gives too
    for (int32_t i = 0; i < static_cast<int32_t>(w_.size()); ++i) {
      if (keep(WeightKey(w_[i]), i)) best = i;
    }
    return best;
  }

 private:
  std::vector<float> w_;
  int bits_;
  uint64_t sums_[kSearchWays];
};

// What a device's sampling kernel computes for an already penalised row: the degenerate rows'
// argmax, otherwise float weights (the host's, so that only the search differs) and the
// threshold search.
int32_t ThresholdSample(const std::vector<float>& logits, const SamplingRow& rule) {
  const int32_t argmax = ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size()));
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float l : logits) {
    if (std::isnan(l)) return argmax;
    max_logit = std::max(max_logit, l);
  }
  if (rule.greedy || !std::isfinite(max_logit)) return argmax;
  std::vector<float> weights(logits.size());
  const double inv_t = 1.0 / rule.temperature;
  for (size_t i = 0; i < logits.size(); ++i) {
    weights[i] = CandidateWeight(logits[i], max_logit, inv_t);
  }
  SerialRow row(std::move(weights));
  return DrawByThresholds(row, rule);
}

// A small deterministic generator, so each case is the same on every run.
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : s_(seed) {}
  double Uniform() {
    s_ = s_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s_ >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t s_;
};

SamplingRow Rule(float temperature, int32_t top_k, float top_p, float min_p, double uniform) {
  SamplingRow rule;
  rule.greedy = false;
  rule.temperature = temperature;
  rule.top_k = top_k;
  rule.top_p = top_p;
  rule.min_p = min_p;
  rule.uniform = uniform;
  return rule;
}

TEST(SamplingTest, TheThresholdSearchDrawsTheSortingRulesToken) {
  RowSampler sampler;
  Lcg lcg(11);
  int cases = 0;
  for (int32_t vocab : {1, 2, 7, 300, 4096}) {
    for (bool coarse : {false, true}) {
      // Coarse rows take few distinct values, so every cut falls among equal logits.
      std::vector<float> logits(static_cast<size_t>(vocab));
      for (float& l : logits) {
        l = coarse ? static_cast<float>(std::floor(lcg.Uniform() * 4.0))
                   : static_cast<float>(lcg.Uniform() * 12.0 - 6.0);
      }
      for (float temperature : {0.25f, 1.0f, 3.0f}) {
        for (int32_t top_k : {0, 1, 3, 40, vocab + 5}) {
          for (float top_p : {1.0f, 0.9f, 0.3f}) {
            for (float min_p : {0.0f, 0.05f}) {
              for (double uniform : {0.0, lcg.Uniform(), lcg.Uniform(), 0.999999}) {
                const SamplingRow rule = Rule(temperature, top_k, top_p, min_p, uniform);
                ASSERT_EQ(ThresholdSample(logits, rule), sampler.Draw(logits, rule))
                    << "vocab " << vocab << (coarse ? " coarse" : "") << " T " << temperature
                    << " top_k " << top_k << " top_p " << top_p << " min_p " << min_p << " uniform "
                    << uniform;
                ++cases;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 5 * 2 * 3 * 5 * 3 * 2 * 4);
}

TEST(SamplingTest, EqualLogitsAreRankedAndDrawnByIdOnBothPaths) {
  // Four equal weights: top_k 2 keeps ids 0 and 1 (lower ids rank first); the draw walks ids.
  RowSampler sampler;
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  for (double uniform : {0.0, 0.49, 0.5, 0.99}) {
    const SamplingRow rule = Rule(1.0f, 2, 1.0f, 0.0f, uniform);
    const int32_t want = uniform < 0.5 ? 0 : 1;
    EXPECT_EQ(sampler.Draw(logits, rule), want) << uniform;
    EXPECT_EQ(ThresholdSample(logits, rule), want) << uniform;
  }
  // top_p 0.5 reaches its target exactly after two of the four.
  const SamplingRow half = Rule(1.0f, 0, 0.5f, 0.0f, 0.75);
  EXPECT_EQ(sampler.Draw(logits, half), 1);
  EXPECT_EQ(ThresholdSample(logits, half), 1);
}

TEST(SamplingTest, FixedPointWeightsRoundUpAndLeaveRoomForTheWholeRow) {
  EXPECT_EQ(FixedWeightBits(1), 63);
  EXPECT_EQ(FixedWeightBits(2), 62);
  EXPECT_EQ(FixedWeightBits(131072), 46);
  EXPECT_EQ(FixedWeightBits(131073), 45);
  const int bits = FixedWeightBits(131072);
  EXPECT_EQ(FixedWeight(1.0f, bits), uint64_t{1} << 46);
  EXPECT_EQ(FixedWeight(0.75f, bits), uint64_t{3} << 44);
  EXPECT_EQ(FixedWeight(0.0f, bits), 0u);
  // 1 + 2^-23 of 2^-30: the last mantissa bit falls below the point, and rounds up.
  EXPECT_EQ(FixedWeight(std::ldexp(1.0f + 0x1.0p-23f, -30), 40), (uint64_t{1} << 10) + 1);
  // Positive weights far below the point, subnormal ones too, still count.
  EXPECT_EQ(FixedWeight(1e-30f, bits), 1u);
  EXPECT_EQ(FixedWeight(std::numeric_limits<float>::denorm_min(), bits), 1u);
  // A whole row of ones reaches 2^63 and no further.
  EXPECT_EQ(131072 * FixedWeight(1.0f, bits), uint64_t{1} << 63);
  EXPECT_EQ(FixedFraction(0.5, 1000), 500u);
  EXPECT_EQ(FixedFraction(std::numeric_limits<double>::quiet_NaN(), 1000), 0u);
  EXPECT_EQ(FixedFraction(2.0, 1000), 1000u);
}

TEST(SamplingTest, AWeightBelowTheFixedPointIsStillDrawnFirstAtUniformZero) {
  // Token 0's weight, e^-80 ≈ 1.8e-35, is far below the fixed point's 2^-62: rounded up, it still
  // counts, and a draw of 0 takes it, as the sorting rule's draw does.
  RowSampler sampler;
  const std::vector<float> logits = {-80.0f, 0.0f};
  const SamplingRow rule = Rule(1.0f, 0, 1.0f, 0.0f, 0.0);
  EXPECT_EQ(sampler.Draw(logits, rule), 0);
  EXPECT_EQ(ThresholdSample(logits, rule), 0);
}

TEST(SamplingTest, ATopPTooSmallForTheFixedPointStillKeepsTheMostLikelyToken) {
  // top_p · total rounds to 0 in fixed point: the cut still keeps the most likely token (id 5,
  // not the lowest id), as the sorting rule does.
  RowSampler sampler;
  std::vector<float> logits(131072, -4.6f);
  logits[5] = 0.0f;
  for (float top_p : {1e-20f, 1e-30f}) {
    const SamplingRow rule = Rule(1.0f, 0, top_p, 0.0f, 0.3);
    EXPECT_EQ(sampler.Draw(logits, rule), 5) << top_p;
    EXPECT_EQ(ThresholdSample(logits, rule), 5) << top_p;
  }
}

TEST(SamplingTest, DegenerateRowsGiveTheirArgmaxOnBothPaths) {
  RowSampler sampler;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // top_k 2 meets the NaN among its first two tokens, or past them; 0 in the scan for the max.
  for (int32_t top_k : {0, 2}) {
    const SamplingRow rule = Rule(0.7f, top_k, 0.9f, 0.0f, 0.5);
    for (const std::vector<float>& row : std::vector<std::vector<float>>{{0.5f, nan, 3.0f},
                                                                         {0.5f, 1.0f, 3.0f, nan},
                                                                         {-inf, -inf, -inf},
                                                                         {1.0f, inf, 2.0f, inf}}) {
      const int32_t argmax = ArgmaxRow(row.data(), static_cast<int64_t>(row.size()));
      EXPECT_EQ(sampler.Draw(row, rule), argmax) << "top_k " << top_k;
      EXPECT_EQ(ThresholdSample(row, rule), argmax) << "top_k " << top_k;
      EXPECT_EQ(sampler.Distribution(row, rule),
                (std::vector<std::pair<int32_t, double>>{{argmax, 1.0}}));
    }
  }
  // -inf entries beside a finite maximum weigh nothing and are never drawn.
  const std::vector<float> masked = {-inf, 2.0f, -inf};
  for (double u : {0.0, 0.5, 0.999}) {
    EXPECT_EQ(sampler.Draw(masked, Rule(1.0f, 0, 1.0f, 0.0f, u)), 1);
    EXPECT_EQ(ThresholdSample(masked, Rule(1.0f, 0, 1.0f, 0.0f, u)), 1);
  }
}

TEST(SamplingTest, ReadBackSampledAppliesEachRowsRuleAndPenaltiesAndGivesLogprobs) {
  const int64_t cols = 50;
  const int64_t ld = 64;  // rows strided wider than the vocabulary
  std::vector<float> logits(static_cast<size_t>(3 * ld), -100.0f);
  Lcg lcg(5);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < cols; ++c) logits[r * ld + c] = static_cast<float>(lcg.Uniform() * 4);
  }
  // Row 0: greedy with a repetition penalty on its argmax, which then loses to another token.
  // Row 1: sampled with presence and frequency penalties, and its logprobs (of the raw row).
  // Row 2: sampled, no penalties.
  const int32_t argmax0 = ArgmaxRow(logits.data(), cols);
  std::vector<PenaltyToken> seen = {{argmax0, 0}, {3, 2}, {7, 1}};
  std::vector<SamplingRow> rules(3);
  rules[0].penalties.repetition_penalty = 100.0f;
  rules[0].penalties_end = 1;
  rules[1] = Rule(0.8f, 10, 0.95f, 0.0f, 0.37);
  rules[1].penalties = {1.0f, 0.5f, 0.25f};
  rules[1].penalties_begin = 1;
  rules[1].penalties_end = 3;
  rules[1].top_logprobs = 4;
  rules[2] = Rule(1.3f, 0, 1.0f, 0.02f, 0.81);

  RowSampler sampler;
  std::vector<SampledToken> want(3);
  for (size_t r = 0; r < 3; ++r) {
    const std::vector<float> row(logits.begin() + r * ld, logits.begin() + r * ld + cols);
    want[r] = sampler.Sample(row, rules[r], PenaltyTokensOf(rules[r], seen));
  }
  EXPECT_NE(want[0].token, argmax0);
  const std::vector<float> row1(logits.begin() + ld, logits.begin() + ld + cols);
  std::vector<TokenLogprob> top(4);
  EXPECT_EQ(want[1].logprob, ComputeLogprobs(row1, want[1].token, top));
  for (size_t k = 0; k < top.size(); ++k) {
    EXPECT_EQ(want[1].top[k].token, top[k].token);
    EXPECT_EQ(want[1].top[k].logprob, top[k].logprob);
  }
  for (const std::unique_ptr<Ops>& ops : testing::HostBackends()) {
    const std::vector<float> before = logits;
    std::vector<SampledToken> got(3);
    EXPECT_EQ(ops->ReadBackSampled(logits.data(), ld, cols, rules, seen, got.data()), "");
    EXPECT_EQ(logits, before) << ops->name();  // the rows are left as they are
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(got[r].token, want[r].token) << ops->name() << " row " << r;
      EXPECT_EQ(got[r].logprob, want[r].logprob) << ops->name() << " row " << r;
      for (int32_t k = 0; k < rules[r].top_logprobs; ++k) {
        EXPECT_EQ(got[r].top[k].token, want[r].top[k].token) << ops->name() << " row " << r;
      }
    }
  }
}

TEST(SamplingTest, PenaltyRangesOutsideTheTableAreIgnored) {
  const std::vector<PenaltyToken> seen = {{1, 1}, {2, 0}};
  SamplingRow rule;
  rule.penalties_begin = 1;
  rule.penalties_end = 3;
  EXPECT_TRUE(PenaltyTokensOf(rule, seen).empty());
  rule.penalties_begin = -1;
  rule.penalties_end = 1;
  EXPECT_TRUE(PenaltyTokensOf(rule, seen).empty());
  rule.penalties_begin = 1;
  rule.penalties_end = 2;
  ASSERT_EQ(PenaltyTokensOf(rule, seen).size(), 1u);
  EXPECT_EQ(PenaltyTokensOf(rule, seen)[0].token, 2);
  // A penalty token outside the row is passed over.
  RowSampler sampler;
  const std::vector<PenaltyToken> stray = {{-4, 1}, {99, 3}};
  SamplingRow greedy;
  greedy.penalties.repetition_penalty = 2.0f;
  EXPECT_EQ(sampler.Sample(std::vector<float>{0.0f, 3.0f, 1.0f}, greedy, stray).token, 1);
}

}  // namespace
}  // namespace tandem::kernels
