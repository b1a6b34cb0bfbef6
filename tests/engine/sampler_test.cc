#include "engine/sampler.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

const std::vector<float> kLogits = {0.1f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f};

TEST(SamplerTest, GreedyPicksTheFirstMaximum) {
  Sampler sampler(SamplingParams{});
  EXPECT_EQ(sampler.Sample(kLogits), 1);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentStream) {
  SamplingParams p;
  p.greedy = false;
  p.temperature = 1.5f;
  p.seed = 42;
  Sampler a(p), b(p);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a.Sample(kLogits));
    tb.push_back(b.Sample(kLogits));
  }
  EXPECT_EQ(ta, tb);
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> tc;
  for (int i = 0; i < 200; ++i) tc.push_back(c.Sample(kLogits));
  EXPECT_NE(ta, tc);
}

TEST(SamplerTest, TopKAndTopPRestrictTheCandidates) {
  SamplingParams p;
  p.greedy = false;
  p.temperature = 1.0f;
  p.top_k = 2;
  Sampler k2(p);
  for (int i = 0; i < 300; ++i) {
    const int32_t t = k2.Sample(kLogits);
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
  p.top_k = 0;
  p.top_p = 0.01f;  // only the most likely token survives
  Sampler nucleus(p);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(nucleus.Sample(kLogits), 1);
}

TEST(SamplerTest, FrequenciesFollowTheSoftmax) {
  SamplingParams p;
  p.greedy = false;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(p);
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.Sample(logits);
  EXPECT_NEAR(ones / static_cast<double>(n), 0.75, 0.02);
}

TEST(SamplerTest, InvalidParametersAreNamed) {
  SamplingParams p;
  p.greedy = false;
  p.temperature = 0.0f;
  EXPECT_NE(ValidateSamplingParams(p).message().find("temperature"), std::string::npos);
  p.temperature = 1.0f;
  p.top_p = 1.5f;
  EXPECT_NE(ValidateSamplingParams(p).message().find("top_p"), std::string::npos);
  p.top_p = 1.0f;
  p.top_k = -1;
  EXPECT_NE(ValidateSamplingParams(p).message().find("top_k"), std::string::npos);
}

}  // namespace
}  // namespace tandem::engine
