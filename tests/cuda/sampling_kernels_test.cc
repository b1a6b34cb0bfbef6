// The device's sampling read-back (CudaOps::ReadBackSampled, cuda::SampleRows) against the
// host's (Ops::ReadBackSampled, kernels::RowSampler): the same token for every rule on rows
// whose cuts do not fall within rounding, degenerate rows included, the same logprobs to
// rounding; and the same token on every run, in every batch and with any number of blocks per
// row.
#include "kernels/cuda/sampling_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cuda/shared_memory_limit.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/sampling_row.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::kernels::cuda {
namespace {

using testing::NewOps;
using testing::ToDevice;

struct Batch {
  int64_t cols = 0;
  int64_t ld = 0;
  std::vector<float> logits;  // [rules.size(), ld]
  std::vector<SamplingRow> rules;
  std::vector<PenaltyToken> seen;
};

// Rows of random logits, each with its own rule: every combination of temperature, top-k,
// top-p, min-p and penalties, greedy ones among them.
Batch RandomBatch(int64_t cols, uint32_t seed) {
  Batch b;
  b.cols = cols;
  b.ld = cols + 5;
  ::tandem::kernels::testing::Rng rng(seed);
  for (float temperature : {0.3f, 1.0f, 2.0f}) {
    for (int32_t top_k : {0, 1, 8, 100}) {
      for (float top_p : {1.0f, 0.92f, 0.4f}) {
        for (float min_p : {0.0f, 0.03f}) {
          for (int penalised = 0; penalised < 2; ++penalised) {
            SamplingRow& rule = b.rules.emplace_back();
            rule.greedy = temperature == 2.0f && top_k == 100 && top_p == 0.4f;
            rule.temperature = temperature;
            rule.top_k = top_k;
            rule.top_p = top_p;
            rule.min_p = min_p;
            rule.uniform = rng.Scalar(0.0f, 1.0f);
            rule.top_logprobs = top_k == 8 ? 5 : 0;  // logprobs of the raw row on some rows
            rule.logprobs = min_p > 0.0f;
            rule.penalties_begin = static_cast<int32_t>(b.seen.size());
            if (penalised) {
              rule.penalties = {1.4f, 0.3f, 0.2f};
              for (int32_t t = 0; t < 40 && t < cols; t += 3) b.seen.push_back({t, t % 4});
            }
            rule.penalties_end = static_cast<int32_t>(b.seen.size());
          }
        }
      }
    }
  }
  b.logits = rng.Uniform(b.rules.size() * static_cast<size_t>(b.ld), -8.0f, 8.0f);
  return b;
}

std::vector<SampledToken> OnHost(const Batch& b) {
  std::vector<SampledToken> sampled(b.rules.size());
  // The reference backend's is the default read-back: kernels::RowSampler, row after row.
  EXPECT_EQ(ReferenceOps().ReadBackSampled(b.logits.data(), b.ld, b.cols, b.rules, b.seen,
                                           sampled.data()),
            "");
  return sampled;
}

std::vector<SampledToken> OnDevice(CudaOps& ops, const Batch& b) {
  auto logits = ToDevice(b.logits);
  std::vector<SampledToken> sampled(b.rules.size());
  EXPECT_EQ(ops.ReadBackSampled(logits.get(), b.ld, b.cols, b.rules, b.seen, sampled.data()), "");
  // The rows are left as they are, bit for bit (a NaN among them never compares equal).
  const std::vector<float> after = testing::ToHost(logits);
  EXPECT_EQ(after.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(after.data(), b.logits.data(), after.size() * sizeof(float)), 0);
  return sampled;
}

std::vector<int32_t> Tokens(const std::vector<SampledToken>& sampled) {
  std::vector<int32_t> tokens;
  for (const SampledToken& s : sampled) tokens.push_back(s.token);
  return tokens;
}

// Logprobs agree to rounding (the sums run in another order); the top tokens exactly.
void ExpectSameLogprobs(const Batch& b, const std::vector<SampledToken>& got,
                        const std::vector<SampledToken>& want) {
  for (size_t r = 0; r < b.rules.size(); ++r) {
    if (!b.rules[r].logprobs && b.rules[r].top_logprobs == 0) continue;
    EXPECT_NEAR(got[r].logprob, want[r].logprob, 1e-5) << "row " << r;
    for (int32_t k = 0; k < b.rules[r].top_logprobs && k < b.cols; ++k) {
      EXPECT_EQ(got[r].top[k].token, want[r].top[k].token) << "row " << r << " top " << k;
      EXPECT_NEAR(got[r].top[k].logprob, want[r].top[k].logprob, 1e-5) << "row " << r;
    }
  }
}

TEST(CudaSamplingTest, RowsDrawTheHostRulesTokens) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  for (int64_t cols : {1, 7, 300, 5000, 70001}) {
    const Batch batch = RandomBatch(cols, static_cast<uint32_t>(cols));
    const std::vector<SampledToken> got = OnDevice(*ops, batch), want = OnHost(batch);
    EXPECT_EQ(Tokens(got), Tokens(want)) << "vocabulary " << cols;
    ExpectSameLogprobs(batch, got, want);
  }
}

// GPUs with 99 KB of shared memory per block (A10, L4, RTX) sample with 256 threads per row:
// the same rule, the same tokens.
TEST(CudaSamplingTest, SmallerGpusDrawTheHostRulesTokensToo) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  const ScopedBlockSharedMemoryLimit sm86(99 << 10);
  for (int64_t cols : {7, 5000, 70001}) {
    const Batch batch = RandomBatch(cols, static_cast<uint32_t>(cols) + 1);
    const std::vector<SampledToken> got = OnDevice(*ops, batch), want = OnHost(batch);
    EXPECT_EQ(Tokens(got), Tokens(want)) << "vocabulary " << cols;
    ExpectSameLogprobs(batch, got, want);
  }
}

TEST(CudaSamplingTest, ARowsTokenIsTheSameOnEveryRunAndInEveryBatch) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  const Batch batch = RandomBatch(32000, 3);
  const std::vector<int32_t> first = Tokens(OnDevice(*ops, batch));
  EXPECT_EQ(Tokens(OnDevice(*ops, batch)), first);
  for (size_t r : {size_t{0}, size_t{17}, batch.rules.size() - 1}) {
    Batch alone;
    alone.cols = batch.cols;
    alone.ld = batch.ld;
    alone.logits.assign(batch.logits.begin() + r * batch.ld,
                        batch.logits.begin() + (r + 1) * batch.ld);
    alone.rules = {batch.rules[r]};
    alone.seen = batch.seen;  // the rule's range still indexes it
    EXPECT_EQ(Tokens(OnDevice(*ops, alone)), std::vector<int32_t>{first[r]}) << "row " << r;
  }
}

TEST(CudaSamplingTest, DegenerateAndTiedRowsFollowTheHostRule) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      {0.5f, nan, 3.0f, 1.0f},   // NaN: the argmax
      {-inf, -inf, -inf, -inf},  // no finite maximum
      {1.0f, inf, 2.0f, inf},    // an infinite maximum
      {-inf, 2.0f, -inf, -inf},  // one finite token
      {1.0f, 1.0f, 1.0f, 1.0f},  // ties: top_k 2 keeps ids 0 and 1
      {1.0f, 1.0f, 1.0f, 1.0f},  // ties: top_p 0.5 stops after two of four
  };
  Batch b;
  b.cols = 4;
  b.ld = 4;
  for (const std::vector<float>& row : rows)
    b.logits.insert(b.logits.end(), row.begin(), row.end());
  for (size_t r = 0; r < rows.size(); ++r) {
    SamplingRow& rule = b.rules.emplace_back();
    rule.greedy = false;
    rule.uniform = 0.75;
    rule.top_k = r == 4 ? 2 : 0;
    rule.top_p = r == 5 ? 0.5f : 1.0f;
    rule.logprobs = true;
  }
  const std::vector<SampledToken> want = OnHost(b), got = OnDevice(*ops, b);
  EXPECT_EQ(Tokens(want), (std::vector<int32_t>{2, 0, 1, 1, 1, 1}));
  EXPECT_EQ(Tokens(got), Tokens(want));
  // The logprobs too: NaN where the host's are (a NaN logit, an infinite maximum).
  for (size_t r = 0; r < rows.size(); ++r) {
    if (std::isnan(want[r].logprob)) {
      EXPECT_TRUE(std::isnan(got[r].logprob)) << "row " << r << ": " << got[r].logprob;
    } else {
      EXPECT_NEAR(got[r].logprob, want[r].logprob, 1e-5) << "row " << r;
    }
  }
}

// cuda::SampleRows itself, with `blocks` blocks per row.
std::vector<SampledToken> SampleWithBlocks(const Batch& b, int blocks) {
  const auto logits = ToDevice(b.logits);
  const auto rules = ToDevice(b.rules);
  const auto seen = ToDevice(b.seen.empty() ? std::vector<PenaltyToken>(1) : b.seen);
  auto scratch = ToDevice(std::vector<float>(b.rules.size() * static_cast<size_t>(b.cols)));
  auto out = ToDevice(std::vector<SampledToken>(b.rules.size()));
  const cudaError_t status = SampleRows(
      nullptr, logits.get(), b.ld, static_cast<int64_t>(b.rules.size()), b.cols, rules.get(),
      seen.get(), static_cast<int64_t>(b.seen.size()), scratch.get(), out.get(), blocks);
  EXPECT_EQ(status, cudaSuccess) << cudaGetErrorString(status);
  return testing::ToHost(out);
}

// A row shared by a cluster of blocks (sm_90) draws the same token, with the same logprobs bit for
// bit, as a row in one block: the sums are of integers. (Without clusters, only one block.)
TEST(CudaSamplingTest, AnyNumberOfBlocksPerRowGivesTheSameBits) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  const int most = MostSampleBlocksPerRow();
  ASSERT_GE(most, 1);
  for (int64_t cols : {1, 7, 5000, 70001}) {
    SCOPED_TRACE(::testing::Message() << "vocabulary " << cols);
    const Batch batch = RandomBatch(cols, static_cast<uint32_t>(cols) + 7);
    const std::vector<SampledToken> one = SampleWithBlocks(batch, 1);
    EXPECT_EQ(Tokens(one), Tokens(OnHost(batch)));
    for (int blocks = 2; blocks <= most; blocks *= 2) {
      const std::vector<SampledToken> shared = SampleWithBlocks(batch, blocks);
      ASSERT_EQ(shared.size(), one.size());
      for (size_t r = 0; r < one.size(); ++r) {
        EXPECT_EQ(std::memcmp(&shared[r], &one[r], sizeof(SampledToken)), 0)
            << blocks << " blocks, row " << r << ": token " << shared[r].token << " against "
            << one[r].token;
      }
    }
  }
  // More blocks than the device can place are refused, not run wrongly.
  const Batch batch = RandomBatch(7, 1);
  const auto logits = ToDevice(batch.logits);
  const auto rules = ToDevice(batch.rules);
  const auto seen = ToDevice(batch.seen);
  auto scratch = ToDevice(std::vector<float>(batch.rules.size() * 7));
  auto out = ToDevice(std::vector<SampledToken>(batch.rules.size()));
  EXPECT_EQ(SampleRows(nullptr, logits.get(), batch.ld, static_cast<int64_t>(batch.rules.size()), 7,
                       rules.get(), seen.get(), static_cast<int64_t>(batch.seen.size()),
                       scratch.get(), out.get(), most * 2),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace tandem::kernels::cuda
