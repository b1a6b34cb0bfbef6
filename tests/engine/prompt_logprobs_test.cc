// Prompt logprobs (Request::prompt_logprobs, OpenAI's `echo` with `logprobs`) through the real
// scheduler, on every family. The logprob of prompt token p must be, bit for bit, what a request
// whose prompt ends just before p reports for p as its next token (a logit_bias forces p; logprobs
// are those of the raw logits), wherever p falls in the prefill's chunks. Scoring must change
// nothing else: the same tokens follow, a cached prompt is scored all the same, a preempted
// prefill scores each token once, the choices of one prompt all get them, and a request may score
// its prompt and generate nothing.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using testing::Backend;
using testing::Drain;
using testing::LoadFixtureModel;
using testing::Outcome;
using testing::SameLogprobs;
using testing::SchedulerHarness;
using testing::SmallSteps;
using testing::Tokens;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPromptTokens = 70;
constexpr int32_t kTop = 3;

Request Scoring(std::vector<int32_t> prompt, int32_t max_new_tokens) {
  Request r = testing::GreedyWithLogprobs(std::move(prompt), max_new_tokens);
  r.prompt_logprobs = kTop;
  return r;
}

class PromptLogprobsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = LoadFixtureModel(GetParam());
    ASSERT_NE(model_, nullptr);
    vocab_ = model_->config().vocab_size;
  }

  std::unique_ptr<SchedulerHarness> Harness(CachePolicy policy = CachePolicy::kMarconi,
                                            size_t memory = 64 * kMiB,
                                            SchedulerConfig config = SmallSteps()) {
    return std::make_unique<SchedulerHarness>(*model_, policy, memory, config, Backend::kCpu,
                                              "avmp-dynamic", testing::SharingEveryPage());
  }

  // What prompt token `position` of `prompt` should be scored: the first token of a lone
  // request for the tokens before it, forced to be that token (its logprob is of the raw logits),
  // with the kTop most likely beside it.
  std::vector<TopLogprob> Expected(const std::vector<int32_t>& prompt, size_t position) {
    Request r = testing::GreedyWithLogprobs(
        std::vector<int32_t>(prompt.begin(), prompt.begin() + static_cast<ptrdiff_t>(position)), 1);
    r.sampling.top_logprobs = kTop;
    r.sampling.logit_bias = {{prompt[position], SamplingParams::kMaxLogitBias}};
    const Outcome lone = Harness(CachePolicy::kNone)->Run(std::move(r));
    EXPECT_EQ(lone.tokens, std::vector<int32_t>{prompt[position]});
    return lone.logprobs.empty() ? std::vector<TopLogprob>{} : lone.logprobs[0];
  }

  // Every prompt token's logprob as lone requests give them (positions 1 .. size - 1).
  std::vector<std::vector<TopLogprob>> AllExpected(const std::vector<int32_t>& prompt) {
    std::vector<std::vector<TopLogprob>> all;
    for (size_t p = 1; p < prompt.size(); ++p) all.push_back(Expected(prompt, p));
    return all;
  }

  std::unique_ptr<models::Model> model_;
  int32_t vocab_ = 0;
};

TEST_P(PromptLogprobsTest, EachTokenIsScoredAsARequestEndingBeforeIt) {
  const std::vector<int32_t> prompt = Tokens(kPromptTokens, 3, vocab_);
  auto harness = Harness();
  const Outcome got = harness->Run(Scoring(prompt, 5));
  ASSERT_EQ(got.finished.finish_reason, FinishReason::kLength) << got.finished.error;
  ASSERT_EQ(got.prompt_logprobs.size(), kPromptTokens - 1);
  // They come with the first token.
  EXPECT_EQ(got.prompt_logprobs_event, 0);
  // Chunks of 32 tokens: the first and last rows of each, and the prompt's last token.
  for (size_t p : {1, 2, 31, 32, 33, 45, 63, 64, 65, 69}) {
    SCOPED_TRACE(p);
    const std::vector<TopLogprob>& entry = got.prompt_logprobs[p - 1];
    EXPECT_EQ(entry.size(), 1u + kTop);
    EXPECT_EQ(entry[0].token, prompt[p]);
    EXPECT_TRUE(SameLogprobs({entry}, {Expected(prompt, p)}));
  }
  // Scoring changes nothing that follows.
  const Outcome plain = Harness(CachePolicy::kNone)->Run(testing::GreedyWithLogprobs(prompt, 5));
  EXPECT_EQ(got.tokens, plain.tokens);
  EXPECT_TRUE(SameLogprobs(got.logprobs, plain.logprobs));
  EXPECT_TRUE(plain.prompt_logprobs.empty());
  EXPECT_EQ(plain.prompt_logprobs_event, -1);
}

TEST_P(PromptLogprobsTest, SampledOutputIsUnchanged) {
  const std::vector<int32_t> prompt = Tokens(kPromptTokens, 4, vocab_);
  Request sampled = testing::GreedyWithLogprobs(prompt, 12);
  sampled.sampling.greedy = false;
  sampled.sampling.temperature = 1.2f;
  sampled.sampling.seed = 99;
  // A bias (applied on the host) changes what is sampled, not the raw logits' scores.
  sampled.sampling.logit_bias = {{std::min(prompt[5], prompt[9]), 3.0f},
                                 {std::max(prompt[5], prompt[9]), -2.0f}};
  if (prompt[5] == prompt[9]) sampled.sampling.logit_bias.pop_back();
  const Outcome plain = Harness()->Run(sampled);
  sampled.prompt_logprobs = 0;
  const Outcome scored = Harness()->Run(sampled);
  EXPECT_EQ(scored.tokens, plain.tokens);
  EXPECT_TRUE(SameLogprobs(scored.logprobs, plain.logprobs));
  ASSERT_EQ(scored.prompt_logprobs.size(), kPromptTokens - 1);
  for (const auto& entry : scored.prompt_logprobs) EXPECT_EQ(entry.size(), 1u);  // no top ones
  sampled.sampling.logit_bias.clear();
  sampled.prompt_logprobs = kTop;
  const Outcome unbiased = Harness()->Run(sampled);
  ASSERT_EQ(unbiased.prompt_logprobs.size(), kPromptTokens - 1);
  for (size_t p = 0; p < unbiased.prompt_logprobs.size(); ++p) {
    EXPECT_EQ(unbiased.prompt_logprobs[p][0].logprob, scored.prompt_logprobs[p][0].logprob) << p;
  }
}

TEST_P(PromptLogprobsTest, AScoringRequestWithoutRowsLetsOthersIn) {
  SchedulerConfig config = SmallSteps();
  config.prompt_logprob_rows = 16;
  auto harness = Harness(CachePolicy::kNone, 64 * kMiB, config);
  auto first = harness->Add(Scoring(Tokens(40, 12, vocab_), 0));
  auto second = harness->Add(Scoring(Tokens(40, 13, vocab_), 0));
  auto plain = harness->Add(testing::GreedyWithLogprobs(Tokens(40, 14, vocab_), 2));
  harness->scheduler().Step();
  // The first took the step's 16 scoring rows; the second waits for rows of its own, but the
  // request behind it is not held back.
  EXPECT_EQ(harness->scheduler().status_of(first->id()), SequenceStatus::kPrefilling);
  EXPECT_EQ(harness->scheduler().status_of(second->id()), SequenceStatus::kWaiting);
  EXPECT_EQ(harness->scheduler().status_of(plain->id()), SequenceStatus::kPrefilling);
  harness->RunUntilIdle();
  EXPECT_EQ(Drain(*first).prompt_logprobs.size(), 39u);
  EXPECT_EQ(Drain(*second).prompt_logprobs.size(), 39u);
  EXPECT_EQ(Drain(*plain).tokens.size(), 2u);
}

TEST_P(PromptLogprobsTest, ScoringOnlyGeneratesNothingAndCachesThePrompt) {
  const std::vector<int32_t> prompt = Tokens(40, 5, vocab_);
  auto harness = Harness();
  const Outcome got = harness->Run(Scoring(prompt, 0));
  EXPECT_EQ(got.finished.finish_reason, FinishReason::kLength) << got.finished.error;
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_EQ(got.finished.usage.completion_tokens, 0);
  EXPECT_EQ(got.finished.usage.prompt_tokens, 40);
  // On the finished event, the only one.
  EXPECT_EQ(got.prompt_logprobs_event, 0);
  EXPECT_TRUE(SameLogprobs(got.prompt_logprobs, AllExpected(prompt)));
  // The scored prompt's state went to the cache: a later request that continues it restores it.
  std::vector<int32_t> longer = prompt;
  for (int32_t t : Tokens(10, 6, vocab_)) longer.push_back(t);
  const Outcome later = harness->Run(testing::GreedyWithLogprobs(longer, 3));
  EXPECT_EQ(later.finished.usage.cached_tokens, 40);
  EXPECT_EQ(later.tokens,
            Harness(CachePolicy::kNone)->Run(testing::GreedyWithLogprobs(longer, 3)).tokens);
}

TEST_P(PromptLogprobsTest, ACachedPromptIsScoredAllTheSame) {
  const std::vector<int32_t> prompt = Tokens(kPromptTokens, 6, vocab_);
  const Outcome want = Harness(CachePolicy::kNone)->Run(Scoring(prompt, 4));
  // A request for the first 50 tokens leaves their state in the cache (it computed exactly
  // those), so the prompt's first 50 tokens hit.
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 50);
  auto harness = Harness();
  harness->Run(testing::GreedyWithLogprobs(head, 1));
  const Outcome scored = harness->Run(Scoring(prompt, 4));
  // Every row had to be computed, so none of the prompt was restored.
  EXPECT_EQ(scored.finished.usage.cached_tokens, 0);
  EXPECT_TRUE(SameLogprobs(scored.prompt_logprobs, want.prompt_logprobs));
  EXPECT_EQ(scored.tokens, want.tokens);
  EXPECT_TRUE(SameLogprobs(scored.logprobs, want.logprobs));
  // Without scoring, the same prompt restores what the cache holds.
  const Outcome plain = harness->Run(testing::GreedyWithLogprobs(prompt, 4));
  EXPECT_GE(plain.finished.usage.cached_tokens, 50);
  EXPECT_EQ(plain.tokens, want.tokens);
}

TEST_P(PromptLogprobsTest, RowsPerStepAreShared) {
  SchedulerConfig config = SmallSteps();
  config.prompt_logprob_rows = 16;
  auto harness = Harness(CachePolicy::kNone, 64 * kMiB, config);
  const std::vector<int32_t> a = Tokens(40, 7, vocab_);
  const std::vector<int32_t> b = Tokens(40, 8, vocab_);
  auto stream_a = harness->Add(Scoring(a, 0));
  auto stream_b = harness->Add(Scoring(b, 0));
  harness->RunUntilIdle();
  const Outcome got_a = Drain(*stream_a);
  const Outcome got_b = Drain(*stream_b);
  EXPECT_TRUE(SameLogprobs(got_a.prompt_logprobs, AllExpected(a)));
  EXPECT_TRUE(SameLogprobs(got_b.prompt_logprobs, AllExpected(b)));
  // 80 prompt tokens, at most 16 of them per step: 5 steps, where 32-token chunks would take 2.
  EXPECT_EQ(harness->scheduler().stats().steps, 5u);
  EXPECT_EQ(harness->scheduler().stats().prefill_tokens, 80u);
}

TEST_P(PromptLogprobsTest, APrefillPreemptedMidwayScoresEachTokenOnce) {
  // A decodes while B prefills a long prompt in a KV pool that holds exactly both prompts: A's
  // second token needs a page that is not there, so B, the newest, is preempted partway through
  // its prompt, hands its state to the cache, and resumes once A is done, restoring no further
  // than the tokens it has scored.
  if (model_->config().num_attention_layers == 0) GTEST_SKIP() << "no KV pages to run out of";
  const models::StateLayout& layout = model_->layout();
  // A's prompt ends one token short of a page boundary.
  const auto prompt_a_tokens = static_cast<size_t>(4 * layout.page_tokens() - 1);
  const std::vector<int32_t> prompt_a = Tokens(prompt_a_tokens, 9, vocab_);
  const std::vector<int32_t> prompt_b = Tokens(200, 10, vocab_);
  const Outcome lone_a = Harness(CachePolicy::kNone)->Run(Scoring(prompt_a, 40));
  const Outcome lone_b = Harness(CachePolicy::kNone)->Run(Scoring(prompt_b, 2));

  const auto pages = static_cast<size_t>(layout.PagesFor(static_cast<int64_t>(prompt_a_tokens)) +
                                         layout.PagesFor(200));
  const size_t kv_bytes = pages * layout.kv_page_bytes();
  const size_t ssm_bytes = 8 * layout.ssm_block_bytes();
  // With the cache, B restores what it had computed; without, it computes its prompt again and
  // must not score a token twice.
  for (CachePolicy policy : {CachePolicy::kMarconi, CachePolicy::kNone}) {
    SCOPED_TRACE(CachePolicyName(policy));
    SchedulerHarness harness(
        *model_, policy, kv_bytes + ssm_bytes + 4096, SmallSteps(), Backend::kCpu,
        "fixed-dual:" +
            std::to_string(static_cast<double>(ssm_bytes) / static_cast<double>(kv_bytes)),
        testing::SharingEveryPage());
    ASSERT_EQ(harness.allocator().stats(cache::Pool::kKvPage).capacity_units, pages);
    auto stream_a = harness.Add(Scoring(prompt_a, 40));
    while (harness.scheduler().status_of(stream_a->id()) != SequenceStatus::kDecoding) {
      harness.scheduler().Step();
    }
    auto stream_b = harness.Add(Scoring(prompt_b, 2));
    bool prefilling = false, preempted_midway = false;
    while (!harness.scheduler().idle()) {
      harness.scheduler().Step();
      const std::optional<SequenceStatus> b = harness.scheduler().status_of(stream_b->id());
      preempted_midway |= prefilling && b == SequenceStatus::kPreempted;
      prefilling = b == SequenceStatus::kPrefilling;
    }
    EXPECT_TRUE(preempted_midway);
    const uint64_t prompts = prompt_a_tokens + 200;
    if (policy == CachePolicy::kNone) {
      EXPECT_GT(harness.scheduler().stats().prefill_tokens, prompts);
    } else {
      EXPECT_EQ(harness.scheduler().stats().prefill_tokens, prompts);
    }
    const Outcome got_a = Drain(*stream_a);
    const Outcome got_b = Drain(*stream_b);
    ASSERT_EQ(got_a.finished.finish_reason, FinishReason::kLength) << got_a.finished.error;
    ASSERT_EQ(got_b.finished.finish_reason, FinishReason::kLength) << got_b.finished.error;
    EXPECT_EQ(got_b.finished.usage.preemptions, 1);
    EXPECT_TRUE(SameLogprobs(got_a.prompt_logprobs, lone_a.prompt_logprobs));
    EXPECT_TRUE(SameLogprobs(got_b.prompt_logprobs, lone_b.prompt_logprobs));
    EXPECT_EQ(got_a.tokens, lone_a.tokens);
    EXPECT_EQ(got_b.tokens, lone_b.tokens);
    EXPECT_TRUE(SameLogprobs(got_b.logprobs, lone_b.logprobs));
    EXPECT_EQ(harness.scheduler().stats().memory_usage_ratio(), 0.0);
  }
}

TEST_P(PromptLogprobsTest, EveryChoiceGetsThePromptLogprobsOfOnePrefill) {
  const std::vector<int32_t> prompt = Tokens(kPromptTokens, 11, vocab_);
  Request request = Scoring(prompt, 6);
  request.sampling.greedy = false;
  request.sampling.temperature = 1.1f;
  request.sampling.seed = 7;
  auto harness = Harness();
  std::vector<std::shared_ptr<RequestStream>> streams = harness->AddChoices(request, 3);
  harness->RunUntilIdle();
  const Outcome lone = Harness(CachePolicy::kNone)->Run(request);
  for (size_t i = 0; i < streams.size(); ++i) {
    SCOPED_TRACE(i);
    const Outcome got = Drain(*streams[i]);
    EXPECT_TRUE(SameLogprobs(got.prompt_logprobs, lone.prompt_logprobs));
    EXPECT_EQ(got.prompt_logprobs_event, 0);
  }
  // The prompt still ran once: the others restored it and ran its last token.
  EXPECT_EQ(harness->scheduler().stats().prefill_tokens, (kPromptTokens - 1) + 3);

  // Choices that only score: each finishes without a token, its scores on its finished event.
  auto scoring = Harness();
  streams = scoring->AddChoices(Scoring(prompt, 0), 2);
  scoring->RunUntilIdle();
  for (auto& stream : streams) {
    const Outcome got = Drain(*stream);
    EXPECT_EQ(got.finished.finish_reason, FinishReason::kLength) << got.finished.error;
    EXPECT_TRUE(got.tokens.empty());
    EXPECT_TRUE(SameLogprobs(got.prompt_logprobs, lone.prompt_logprobs));
  }
  EXPECT_EQ(scoring->scheduler().stats().prefill_tokens, (kPromptTokens - 1) + 2);
}

TEST_P(PromptLogprobsTest, AOneTokenPromptHasNoneToScore) {
  auto harness = Harness();
  const Outcome got = harness->Run(Scoring({5}, 3));
  EXPECT_EQ(got.finished.finish_reason, FinishReason::kLength) << got.finished.error;
  EXPECT_EQ(got.tokens.size(), 3u);
  EXPECT_EQ(got.prompt_logprobs_event, -1);  // no event carries any
  const Outcome only = harness->Run(Scoring({5}, 0));
  EXPECT_EQ(only.finished.finish_reason, FinishReason::kLength) << only.finished.error;
  EXPECT_TRUE(only.tokens.empty());
}

TEST_P(PromptLogprobsTest, ValidationNamesTheField) {
  auto harness = Harness();
  Request r = Scoring(Tokens(8, 1, vocab_), 2);
  r.prompt_logprobs = 21;
  EXPECT_EQ(harness->scheduler().Validate(r).message(),
            "prompt_logprobs: must be in [0, 20], got 21");
  r.prompt_logprobs = -1;
  EXPECT_EQ(harness->scheduler().Validate(r).message(),
            "prompt_logprobs: must be in [0, 20], got -1");
  r.prompt_logprobs.reset();
  r.max_new_tokens = 0;
  EXPECT_EQ(harness->scheduler().Validate(r).message(),
            "max_new_tokens: must be in [1, 4096], got 0 (0 only with prompt logprobs)");
  r.prompt_logprobs = 20;
  EXPECT_TRUE(harness->scheduler().Validate(r).ok());
  r.max_new_tokens = -1;
  EXPECT_EQ(harness->scheduler().Validate(r).message(),
            "max_new_tokens: must be in [0, 4096], got -1");
}

INSTANTIATE_TEST_SUITE_P(Families, PromptLogprobsTest,
                         ::testing::ValuesIn(::tandem::testing::kFamilyFixtures),
                         testing::FixtureTestName);

}  // namespace
}  // namespace tandem::engine
