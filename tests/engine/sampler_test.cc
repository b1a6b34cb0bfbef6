#include "engine/sampler.h"

#include <malloc.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/logits_processors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/row_sampler.h"
#include "tests/address_sanitizer.h"

namespace tandem::engine {
namespace {

using ::testing::HasSubstr;

const std::vector<float> kLogits = {0.1f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f};

SamplingParams Sampling(float temperature = 1.0f, uint64_t seed = 0) {
  SamplingParams p;
  p.greedy = false;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

std::vector<float> LogitsOfProbs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::map<int32_t, double> AsMap(const std::vector<std::pair<int32_t, double>>& d) {
  return std::map<int32_t, double>(d.begin(), d.end());
}

TEST(SamplerTest, GreedyPicksTheFirstMaximum) {
  Sampler sampler(SamplingParams{});
  EXPECT_EQ(sampler.Sample(kLogits), 1);
  BatchSampler batch(6);
  SamplingState state(SamplingParams{});
  EXPECT_EQ(batch.SampleRow(kLogits, state).token, 1);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentStream) {
  SamplingParams p = Sampling(1.5f, 42);
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

// Choices of one request: choice 0 keeps the seed; the others' generators share no draws with
// each other or with the request's own (not one of the first 64 draws of 64 choices repeats),
// and neighbouring seeds do not give neighbouring choices' seeds.
TEST(SamplerTest, ChoiceSeedsStartUnrelatedGenerators) {
  EXPECT_EQ(ChoiceSeed(42, 0), 42u);
  std::set<uint64_t> draws;
  for (int32_t i = 0; i < 64; ++i) {
    Rng rng(ChoiceSeed(42, i));
    for (int d = 0; d < 64; ++d) draws.insert(rng.Next());
  }
  EXPECT_EQ(draws.size(), 64u * 64u);
  EXPECT_NE(ChoiceSeed(42, 1), ChoiceSeed(43, 0));
  EXPECT_NE(ChoiceSeed(42, 2) - ChoiceSeed(42, 1), ChoiceSeed(42, 1) - ChoiceSeed(42, 0));
}

TEST(SamplerTest, TopKAndTopPRestrictTheCandidates) {
  SamplingParams p = Sampling();
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
  Sampler s(Sampling(1.0f, 7));
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.Sample(logits);
  EXPECT_NEAR(ones / static_cast<double>(n), 0.75, 0.02);
}

TEST(SamplerTest, TemperatureScalesTheLogits) {
  BatchSampler batch(2);
  SamplingState state(Sampling(0.5f));
  const auto d = AsMap(batch.Distribution(LogitsOfProbs({0.25, 0.75}), state));
  // (1/4)^2 : (3/4)^2 = 1 : 9.
  EXPECT_NEAR(d.at(0), 0.1, 1e-6);
  EXPECT_NEAR(d.at(1), 0.9, 1e-6);
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  BatchSampler batch(4);
  SamplingParams p = Sampling();
  p.top_p = 0.75f;  // 0.5 falls short, 0.5 + 0.3 reaches it
  SamplingState state(p);
  const auto d = AsMap(batch.Distribution(LogitsOfProbs({0.3, 0.5, 0.05, 0.15}), state));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d.at(1), 0.625, 1e-6);
  EXPECT_NEAR(d.at(0), 0.375, 1e-6);
  // top_p after top_k acts on the renormalised top-k distribution.
  p.top_k = 3;
  p.top_p = 0.9f;  // over {0.5, 0.3, 0.15}/0.95: 0.526, 0.842, 1.0 -> all three
  SamplingState both(p);
  EXPECT_EQ(batch.Distribution(LogitsOfProbs({0.3, 0.5, 0.05, 0.15}), both).size(), 3u);
}

TEST(SamplerTest, TopPOnALargeVocabularyMatchesAFullSort) {
  // 5000: a nucleus past the first 64 (the quickselect); 40000: one past 4096 (ids put back in
  // order through marks rather than a sort).
  for (int32_t vocab : {5000, 40000}) {
    std::vector<float> logits(vocab);
    Rng rng(3);
    for (float& l : logits) l = static_cast<float>(rng.Uniform() * 6.0);
    SamplingParams p = Sampling(0.7f);
    p.top_p = 0.95f;
    BatchSampler batch(vocab);
    SamplingState state(p);
    const auto d = batch.Distribution(logits, state);
    // Reference: sort everything, cumulate.
    std::vector<int32_t> order(vocab);
    for (int32_t i = 0; i < vocab; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    double total = 0;
    for (float l : logits) total += std::exp((l - logits[order[0]]) / 0.7);
    double cum = 0;
    size_t keep = 0;
    while (cum < 0.95) cum += std::exp((logits[order[keep++]] - logits[order[0]]) / 0.7) / total;
    ASSERT_EQ(d.size(), keep) << vocab;
    EXPECT_GT(keep, vocab == 5000 ? 64u : 4096u);
    // The candidates come in id order, the order the draw walks.
    std::sort(order.begin(), order.begin() + keep);
    for (size_t i = 0; i < keep; ++i) ASSERT_EQ(d[i].first, order[i]) << vocab << " " << i;
    double sum = 0;
    for (const auto& [token, probability] : d) sum += probability;
    EXPECT_NEAR(sum, 1.0, 1e-9);
  }
}

TEST(SamplerTest, MinPDropsTokensBelowTheScaledMaximum) {
  BatchSampler batch(4);
  SamplingParams p = Sampling();
  p.min_p = 0.2f;  // cutoff 0.2 * 0.5 = 0.1: 0.05 goes
  SamplingState state(p);
  const std::vector<float> logits = LogitsOfProbs({0.5, 0.3, 0.15, 0.05});
  auto d = AsMap(batch.Distribution(logits, state));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_NEAR(d.at(0), 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(d.at(2), 0.15 / 0.95, 1e-6);
  p.min_p = 0.35f;  // cutoff 0.175: only 0.5 and 0.3 stay
  SamplingState tighter(p);
  d = AsMap(batch.Distribution(logits, tighter));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d.at(1), 0.375, 1e-6);
  // Sampling never draws a cut token.
  for (int i = 0; i < 500; ++i) EXPECT_LT(batch.SampleRow(logits, tighter).token, 2);
  // min_p applies after temperature: at T = 0.5 the probabilities are 25:9:2.25:0.25, the
  // cutoff 0.35 * 25 = 8.75 keeps tokens 0 and 1.
  p.min_p = 0.35f;
  p.temperature = 0.5f;
  SamplingState cold(p);
  EXPECT_EQ(batch.Distribution(logits, cold).size(), 2u);
}

// The row the sampling rule draws from under `params` with the tokens `counts` knows.
std::vector<float> Penalise(const PenaltyParams& params, const TokenCounts& counts,
                            const std::vector<float>& logits) {
  std::vector<kernels::PenaltyToken> seen;
  AppendPenaltyTokens(counts, &seen);
  kernels::RowSampler sampler;
  const std::span<const float> row = sampler.Penalised(logits, params, seen);
  return {row.begin(), row.end()};
}

TEST(LogitsProcessorsTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  TokenCounts counts;
  counts.AddPrompt(0);
  counts.AddGenerated(1);
  counts.AddGenerated(1);
  std::vector<float> logits = {2.0f, -1.0f, 3.0f, -4.0f};
  EXPECT_THAT(Penalise({2.0f, 0.0f, 0.0f}, counts, logits),
              ::testing::ElementsAre(1.0f, -2.0f, 3.0f, -4.0f));
}

TEST(LogitsProcessorsTest, PresenceAndFrequencyCountOnlyGeneratedTokens) {
  TokenCounts counts;
  counts.AddPrompt(0);  // prompt only: untouched
  counts.AddPrompt(2);
  counts.AddGenerated(2);
  counts.AddGenerated(1);
  counts.AddGenerated(1);
  counts.AddGenerated(1);
  EXPECT_EQ(counts.generated(1), 3);
  EXPECT_EQ(counts.generated(0), 0);
  EXPECT_TRUE(counts.in_prompt(2));
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  // token 1: 1 - 0.5 - 3 * 0.25; token 2: 1 - 0.5 - 0.25.
  EXPECT_THAT(Penalise({1.0f, 0.5f, 0.25f}, counts, logits),
              ::testing::ElementsAre(1.0f, -0.25f, 0.25f, 1.0f));
  // Negative penalties encourage; repetition applies first, then presence/frequency.
  EXPECT_THAT(Penalise({2.0f, -0.5f, 0.0f}, counts, logits),
              ::testing::ElementsAre(0.5f, 1.0f, 1.0f, 1.0f));
}

TEST(LogitsProcessorsTest, TokenCountsGrowPastTheirReservation) {
  TokenCounts counts;
  counts.Reserve(4);
  for (int32_t t = 0; t < 1000; ++t) counts.AddGenerated(t * 7919 % 100003);
  for (int32_t t = 0; t < 1000; ++t) counts.AddGenerated(t * 7919 % 100003);
  EXPECT_EQ(counts.entries().size(), 1000u);
  EXPECT_EQ(counts.generated_entries().size(), 1000u);
  for (int32_t t = 0; t < 1000; ++t) EXPECT_EQ(counts.generated(t * 7919 % 100003), 2);
  EXPECT_EQ(counts.generated(5), 0);
}

TEST(SamplerTest, PenaltiesChangeTheGreedyChoice) {
  const std::vector<float> logits = {1.0f, 2.0f, 1.9f};
  SamplingParams p;  // greedy
  p.repetition_penalty = 1.5f;
  const std::vector<int32_t> prompt = {1};
  Sampler s(p, prompt);
  EXPECT_EQ(s.Sample(logits), 2);  // 2/1.5 < 1.9
  EXPECT_EQ(s.Sample(logits), 1);  // now both 1 and 2 are penalised: 1.33 vs 1.27

  SamplingParams f;
  f.frequency_penalty = 0.6f;
  Sampler freq(f);
  EXPECT_EQ(freq.Sample(logits), 1);  // nothing generated yet
  EXPECT_EQ(freq.Sample(logits), 2);  // 2 - 0.6 < 1.9
  EXPECT_EQ(freq.Sample(logits), 1);  // 2 - 0.6 > 1.9 - 0.6
  EXPECT_EQ(freq.Sample(logits), 2);
  EXPECT_EQ(freq.state().counts().generated(1), 2);
}

TEST(SamplerTest, LogitBiasMovesTheChoiceButNotTheLogprobs) {
  const std::vector<float> logits = LogitsOfProbs({0.1, 0.2, 0.4, 0.2, 0.1});
  SamplingParams banned;  // greedy
  banned.logit_bias = {{2, -100.0f}};
  banned.logprobs = true;
  Sampler b(banned);
  const SampleResult r = b.SampleWithLogprobs(logits);
  EXPECT_EQ(r.token, 1);  // the likeliest is banned; 1 and 3 tie, lower id first
  EXPECT_NEAR(r.logprob, std::log(0.2), 1e-6);  // the raw model's

  SamplingParams forced = Sampling();  // sampled, not greedy
  forced.logit_bias = {{0, 100.0f}, {4, -100.0f}};
  Sampler f(forced);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(f.Sample(logits), 0);
  // The distribution drawn from: token 0 takes all but e^-100 of it.
  BatchSampler batch(5);
  const auto distribution = batch.Distribution(logits, f.state());
  double zero = 0;
  for (const auto& [token, p] : distribution) {
    if (token == 0) zero = p;
  }
  EXPECT_NEAR(zero, 1.0, 1e-9);

  // A zero bias draws exactly the unbiased stream (the biased path is the same rule on a copy),
  // with penalties too.
  SamplingParams plain = Sampling();
  plain.seed = 99;
  plain.repetition_penalty = 1.3f;
  plain.frequency_penalty = 0.4f;
  plain.top_logprobs = 2;
  SamplingParams zero_bias = plain;
  zero_bias.logit_bias = {{1, 0.0f}, {3, 0.0f}};
  const std::vector<int32_t> prompt = {1, 2};
  Sampler a(plain, prompt), z(zero_bias, prompt);
  for (int i = 0; i < 40; ++i) {
    const SampleResult ra = a.SampleWithLogprobs(logits), rz = z.SampleWithLogprobs(logits);
    ASSERT_EQ(ra.token, rz.token) << i;
    EXPECT_EQ(ra.logprob, rz.logprob);
    EXPECT_EQ(ra.top[0].token, rz.top[0].token);
  }

  // A small bias tilts a tie.
  SamplingParams tilt;
  tilt.logit_bias = {{3, 0.01f}};
  Sampler t(tilt);
  EXPECT_EQ(t.Sample(LogitsOfProbs({0.1, 0.45, 0.0001, 0.45, 0.0})), 3);
}

TEST(SamplerTest, LogprobsAreLogSoftmaxOfTheRawLogits) {
  const std::vector<float> logits = LogitsOfProbs({0.1, 0.2, 0.4, 0.2, 0.1});
  SamplingParams p;  // greedy; penalties must not change the reported logprobs
  p.repetition_penalty = 3.0f;
  p.top_logprobs = 3;
  const std::vector<int32_t> prompt = {2};
  Sampler s(p, prompt);
  const SampleResult r = s.SampleWithLogprobs(logits);
  EXPECT_EQ(r.token, 1);  // 2 is penalised below 1 and 3; 1 wins the tie
  EXPECT_NEAR(r.logprob, std::log(0.2), 1e-6);
  ASSERT_EQ(r.num_top, 3);
  EXPECT_EQ(r.top[0].token, 2);
  EXPECT_NEAR(r.top[0].logprob, std::log(0.4), 1e-6);
  EXPECT_EQ(r.top[1].token, 1);  // ties: lower id first
  EXPECT_EQ(r.top[2].token, 3);
  EXPECT_NEAR(r.top[2].logprob, std::log(0.2), 1e-6);

  SamplingParams chosen_only;
  chosen_only.logprobs = true;
  Sampler c(chosen_only);
  const SampleResult rc = c.SampleWithLogprobs(logits);
  EXPECT_EQ(rc.token, 2);
  EXPECT_NEAR(rc.logprob, std::log(0.4), 1e-6);
  EXPECT_EQ(rc.num_top, 0);

  // Without asking, nothing is computed.
  Sampler none{SamplingParams{}};
  EXPECT_EQ(none.SampleWithLogprobs(logits).logprob, 0.0f);
}

TEST(LogitsProcessorsTest, TopLogprobsOnMoreThanTheVocabulary) {
  const std::vector<float> logits = {0.0f, 1.0f};
  std::vector<TopLogprob> top(5);
  const float lp = ComputeLogprobs(logits, 0, top);
  EXPECT_NEAR(lp, -std::log1p(std::exp(1.0)), 1e-6);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 0);
}

// A seeded request draws the same tokens whatever else is in its batch, and wherever its row is.
TEST(SamplerTest, SeededRowsAreIndependentOfTheBatch) {
  const int32_t vocab = 50;
  const int steps = 40;
  Rng logits_rng(11);
  std::vector<std::vector<float>> rows(steps, std::vector<float>(vocab));
  for (auto& row : rows)
    for (float& l : row) l = static_cast<float>(logits_rng.Uniform() * 4.0);

  SamplingParams target = Sampling(0.9f, 1234);
  target.top_k = 20;
  target.top_p = 0.9f;
  target.min_p = 0.05f;
  target.frequency_penalty = 0.3f;

  // Alone.
  std::vector<int32_t> alone;
  {
    BatchSampler batch(vocab);
    SamplingState state(target, {}, steps);
    for (int s = 0; s < steps; ++s) alone.push_back(batch.SampleRow(rows[s], state).token);
  }
  // In batches of 1..5 rows with other requests (different seeds and rules), the target in a
  // different position each time.
  for (int others = 1; others <= 4; ++others) {
    BatchSampler batch(vocab);
    std::vector<SamplingState> states;
    states.reserve(others + 1);
    for (int o = 0; o < others; ++o) {
      SamplingParams q = Sampling(0.5f + o, 99 + o);
      q.top_k = o;
      q.presence_penalty = 0.5f;
      states.emplace_back(q);
    }
    states.emplace_back(target, std::span<const int32_t>{}, steps);
    std::vector<SamplingState*> order;
    for (auto& s : states) order.push_back(&s);
    std::rotate(order.begin(), order.begin() + (others % order.size()), order.end());
    const size_t target_row = std::find(order.begin(), order.end(), &states.back()) - order.begin();
    std::vector<int32_t> got;
    std::vector<float> logits(order.size() * vocab);
    std::vector<SampleResult> results(order.size());
    for (int s = 0; s < steps; ++s) {
      for (size_t r = 0; r < order.size(); ++r) {
        const std::vector<float>& row = r == target_row ? rows[s] : rows[(s + r + 7) % steps];
        std::copy(row.begin(), row.end(), logits.begin() + r * vocab);
      }
      batch.Sample(logits, order, results);
      got.push_back(results[target_row].token);
    }
    EXPECT_EQ(got, alone) << others << " other rows";
  }
}

TEST(SamplerTest, SteadyStateBatchStepsDoNotAllocate) {
#if TANDEM_ADDRESS_SANITIZER
  GTEST_SKIP() << "mallinfo2 does not see the sanitizer's allocator";
#endif
  const int32_t vocab = 4000;
  std::vector<float> logits(3 * vocab);
  Rng rng(5);
  for (float& l : logits) l = static_cast<float>(rng.Uniform() * 5.0);
  SamplingParams a = Sampling(0.8f, 1);
  a.top_p = 0.9f;
  a.repetition_penalty = 1.2f;
  a.frequency_penalty = 0.2f;
  a.top_logprobs = 5;
  SamplingParams b;  // greedy
  b.presence_penalty = 0.4f;
  SamplingParams c = Sampling(1.0f, 2);
  c.top_k = 40;
  c.min_p = 0.1f;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  const int steps = 200;
  // +1: the warm-up step samples too.
  SamplingState sa(a, prompt, steps + 1), sb(b, prompt, steps + 1), sc(c, prompt, steps + 1);
  std::vector<SamplingState*> states = {&sa, &sb, &sc};
  std::vector<SampleResult> results(3);
  BatchSampler batch(vocab);
  batch.Sample(logits, states, results);  // warm-up
  const size_t before = mallinfo2().uordblks;
  for (int s = 0; s < steps; ++s) {
    logits[s % vocab] += 0.5f;
    batch.Sample(logits, states, results);
  }
  EXPECT_EQ(mallinfo2().uordblks, before);
}

TEST(SamplerTest, DegenerateRowsDoNotCrash) {
  SamplingParams p = Sampling(1e-30f, 1);  // 1/T overflows to inf in float, not in double
  p.min_p = 0.5f;
  BatchSampler batch(3);
  SamplingState state(p);
  EXPECT_EQ(batch.SampleRow(std::vector<float>{0.0f, 1.0f, 0.5f}, state).token, 1);
  const std::vector<float> nan_row = {NAN, NAN, NAN};
  const int32_t t = batch.SampleRow(nan_row, state).token;
  EXPECT_TRUE(t >= 0 && t < 3);
  const std::vector<float> masked = {-INFINITY, 2.0f, -INFINITY};
  SamplingState s2(Sampling(1.0f, 2));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(batch.SampleRow(masked, s2).token, 1);
}

TEST(SamplerTest, InvalidParametersAreNamed) {
  struct Case {
    std::function<void(SamplingParams&)> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](SamplingParams& p) { p.temperature = 0.0f; }, "temperature"},
      {[](SamplingParams& p) { p.temperature = NAN; }, "temperature"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k must be >= 0, got -1"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1], got -0.1"},
      {[](SamplingParams& p) { p.min_p = NAN; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.repetition_penalty = INFINITY; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.top_logprobs = 21; }, "top_logprobs must be in [0, 20], got 21"},
      {[](SamplingParams& p) { p.top_logprobs = -1; }, "top_logprobs"},
      {[](SamplingParams& p) {
         p.logit_bias = {{3, 100.5f}};
       },
       "logit_bias for token 3 must be in [-100, 100], got 100.5"},
      {[](SamplingParams& p) {
         p.logit_bias = {{3, NAN}};
       },
       "logit_bias for token 3"},
      {[](SamplingParams& p) {
         p.logit_bias = {{3, 1.0f}, {3, 2.0f}};
       },
       "logit_bias tokens must be distinct, non-negative and ascending, got 3"},
      {[](SamplingParams& p) {
         p.logit_bias.assign(301, {0, 0.0f});
       },
       "logit_bias may name at most 300 tokens, got 301"},
  };
  for (const Case& c : cases) {
    SamplingParams p = Sampling();
    c.set(p);
    const absl::Status s = ValidateSamplingParams(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
  EXPECT_TRUE(ValidateSamplingParams(Sampling()).ok());
  SamplingParams greedy;
  greedy.temperature = 0.0f;  // ignored when greedy
  EXPECT_TRUE(ValidateSamplingParams(greedy).ok());
}

}  // namespace
}  // namespace tandem::engine
