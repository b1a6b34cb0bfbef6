// Several choices of one prompt (Engine::SubmitChoices, OpenAI's `n`) through the real scheduler,
// on every family: each choice must give, token for token and logprob for logprob, what a lone
// request with its seed gives, while the prompt is prefilled once for all of them through the
// prefix cache. Also: the first choice or the others cancelled while they wait, no cache, a
// prompt the cache already holds, a one-token prompt and scarce memory.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/hydragen_config.h"
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

Request Sampled(std::vector<int32_t> prompt, int32_t max_new_tokens) {
  Request r = testing::GreedyWithLogprobs(std::move(prompt), max_new_tokens);
  r.sampling.greedy = false;
  r.sampling.temperature = 1.3f;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = 4242;
  return r;
}

class ChoicesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = LoadFixtureModel(GetParam());
    ASSERT_NE(model_, nullptr);
    vocab_ = model_->config().vocab_size;
  }

  std::unique_ptr<SchedulerHarness> Harness(CachePolicy policy = CachePolicy::kMarconi,
                                            size_t memory = 64 * kMiB) {
    return std::make_unique<SchedulerHarness>(*model_, policy, memory, SmallSteps(), Backend::kCpu,
                                              "avmp-dynamic", testing::SharingEveryPage());
  }

  // Choice `index` of `request` run as a lone request, with no cache.
  Outcome Alone(Request request, int32_t index) {
    request.sampling.seed = ChoiceSeed(request.sampling.seed, index);
    return Harness(CachePolicy::kNone)->Run(std::move(request));
  }

  std::vector<Outcome> RunChoices(SchedulerHarness& harness, const Request& request, int32_t n) {
    std::vector<std::shared_ptr<RequestStream>> streams = harness.AddChoices(request, n);
    harness.RunUntilIdle();
    std::vector<Outcome> outcomes;
    for (auto& stream : streams) outcomes.push_back(Drain(*stream));
    return outcomes;
  }

  void ExpectLoneOutputs(const std::vector<Outcome>& got, const Request& request) {
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE(i);
      const Outcome want = Alone(request, static_cast<int32_t>(i));
      EXPECT_EQ(got[i].finished.finish_reason, FinishReason::kLength) << got[i].finished.error;
      EXPECT_EQ(got[i].tokens, want.tokens);
      EXPECT_TRUE(SameLogprobs(got[i].logprobs, want.logprobs));
    }
  }

  std::unique_ptr<models::Model> model_;
  int32_t vocab_ = 0;
};

TEST_P(ChoicesTest, EachChoiceIsALoneRequestWithItsSeedAndThePromptRunsOnce) {
  const Request request = Sampled(Tokens(kPromptTokens, 3, vocab_), 12);
  auto harness = Harness();
  const std::vector<Outcome> got = RunChoices(*harness, request, 4);
  ASSERT_EQ(got.size(), 4u);
  ExpectLoneOutputs(got, request);
  // Different seeds: the choices are not copies of one answer.
  bool differ = false;
  for (const Outcome& o : got) differ |= o.tokens != got[0].tokens;
  EXPECT_TRUE(differ);

  // The first choice ran the prompt but its last token; every choice then restored that from
  // the cache and ran the last token itself.
  const SchedulerStats stats = harness->scheduler().stats();
  EXPECT_EQ(stats.prefill_tokens, (kPromptTokens - 1) + 4);
  EXPECT_EQ(stats.cached_tokens, 3 * (kPromptTokens - 1));
  EXPECT_EQ(stats.preemptions, 0u);
  EXPECT_EQ(stats.cache_insert_errors, 0u);
  // Chunks of 32, 32 and 5 prompt tokens, the step where every choice runs the last one and
  // samples, then one decode step per further token.
  EXPECT_EQ(stats.steps, 4u + 11u);
  for (size_t i = 1; i < got.size(); ++i) {
    EXPECT_EQ(got[i].finished.usage.cached_tokens, static_cast<int64_t>(kPromptTokens - 1));
  }
  EXPECT_EQ(got[0].finished.usage.cached_tokens, 0);
  EXPECT_EQ(got[0].finished.usage.preemptions, 0);
  EXPECT_EQ(stats.memory_usage_ratio(), 0.0);
  // The choices decoded their shared prompt pages through Hydragen, and still gave the bits.
  if (model_->config().num_attention_layers > 0) {
    EXPECT_GT(stats.hydragen_nodes, 0);
  }
}

TEST_P(ChoicesTest, GreedyChoicesAreTheSameAnswer) {
  const Request request = testing::GreedyWithLogprobs(Tokens(kPromptTokens, 5, vocab_), 10);
  auto harness = Harness();
  const std::vector<Outcome> got = RunChoices(*harness, request, 3);
  ExpectLoneOutputs(got, request);
  EXPECT_EQ(got[1].tokens, got[0].tokens);
  EXPECT_EQ(got[2].tokens, got[0].tokens);
}

TEST_P(ChoicesTest, WithoutACacheEveryChoicePrefillsThePrompt) {
  const Request request = Sampled(Tokens(kPromptTokens, 6, vocab_), 8);
  auto harness = Harness(CachePolicy::kNone);
  const std::vector<Outcome> got = RunChoices(*harness, request, 3);
  ExpectLoneOutputs(got, request);
  EXPECT_EQ(harness->scheduler().stats().prefill_tokens, 3 * kPromptTokens);
}

TEST_P(ChoicesTest, CancellingTheFirstChoiceLetsTheOthersRun) {
  const Request request = Sampled(Tokens(kPromptTokens, 7, vocab_), 8);
  auto harness = Harness();
  std::vector<std::shared_ptr<RequestStream>> streams = harness->AddChoices(request, 3);
  harness->scheduler().Step();  // the first choice is prefilling, the others wait for it
  ASSERT_EQ(harness->scheduler().status_of(streams[0]->id()), SequenceStatus::kPrefilling);
  ASSERT_EQ(harness->scheduler().status_of(streams[1]->id()), SequenceStatus::kWaiting);
  ASSERT_TRUE(harness->scheduler().Cancel(streams[0]->id()));
  harness->RunUntilIdle();
  EXPECT_EQ(Drain(*streams[0]).finished.finish_reason, FinishReason::kCancelled);
  for (int32_t i = 1; i < 3; ++i) {
    SCOPED_TRACE(i);
    const Outcome got = Drain(*streams[i]);
    const Outcome want = Alone(request, i);
    EXPECT_EQ(got.finished.finish_reason, FinishReason::kLength) << got.finished.error;
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_TRUE(SameLogprobs(got.logprobs, want.logprobs));
  }
  EXPECT_EQ(harness->scheduler().stats().memory_usage_ratio(), 0.0);
}

TEST_P(ChoicesTest, CancellingTheWaitingChoicesLeavesTheFirstAlone) {
  const Request request = Sampled(Tokens(kPromptTokens, 8, vocab_), 8);
  auto harness = Harness();
  std::vector<std::shared_ptr<RequestStream>> streams = harness->AddChoices(request, 3);
  ASSERT_TRUE(harness->scheduler().Cancel(streams[1]->id()));
  ASSERT_TRUE(harness->scheduler().Cancel(streams[2]->id()));
  harness->RunUntilIdle();
  const Outcome got = Drain(*streams[0]);
  const Outcome want = Alone(request, 0);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_TRUE(SameLogprobs(got.logprobs, want.logprobs));
  // Nobody to share with: the prompt ran straight through, with no stop at its last token:
  // three chunks of at most 32 tokens, then a decode step for each token after the first.
  const SchedulerStats stats = harness->scheduler().stats();
  EXPECT_EQ(stats.prefill_tokens, kPromptTokens);
  EXPECT_EQ(stats.steps, 3u + 7u);
}

TEST_P(ChoicesTest, APromptTheCacheHoldsIsRestoredByEveryChoice) {
  Request request = Sampled(Tokens(kPromptTokens, 9, vocab_), 6);
  // The state before the last prompt token is kept by the first request.
  request.checkpoint_hints = {kPromptTokens - 1};
  auto harness = Harness();
  harness->Run(request);
  const uint64_t before = harness->scheduler().stats().prefill_tokens;
  const std::vector<Outcome> got = RunChoices(*harness, request, 3);
  ExpectLoneOutputs(got, request);
  EXPECT_EQ(harness->scheduler().stats().prefill_tokens - before, 3u);
}

TEST_P(ChoicesTest, AOneTokenPromptHasNothingToShare) {
  const Request request = Sampled({static_cast<int32_t>(vocab_ / 2)}, 6);
  auto harness = Harness();
  const std::vector<Outcome> got = RunChoices(*harness, request, 2);
  ExpectLoneOutputs(got, request);
}

TEST_P(ChoicesTest, ScarceMemoryChangesNoChoice) {
  const Request request = Sampled(Tokens(kPromptTokens, 10, vocab_), 40);
  // Room for about two prompts' state at once, and less once they grow: choices wait, preempt
  // each other, and the cache gives up the shared prompt while some still need it.
  const models::StateLayout& layout = model_->layout();
  const size_t per_prompt =
      layout.ssm_block_bytes() * 2 +
      static_cast<size_t>(layout.PagesFor(kPromptTokens)) * layout.kv_page_bytes();
  auto harness = Harness(CachePolicy::kMarconi, 2 * per_prompt + per_prompt / 4);
  const std::vector<Outcome> got = RunChoices(*harness, request, 4);
  ExpectLoneOutputs(got, request);
  const SchedulerStats stats = harness->scheduler().stats();
  EXPECT_EQ(stats.memory_usage_ratio(), 0.0);
  // The pressure was real: choices were preempted, or the cache gave the shared prompt up and
  // some choice prefilled it again (with room, the prompt runs once plus a token per choice).
  EXPECT_TRUE(stats.preemptions > 0 || stats.prefill_tokens > kPromptTokens - 1 + 4)
      << stats.preemptions << " preemptions, " << stats.prefill_tokens << " prefill tokens";
}

INSTANTIATE_TEST_SUITE_P(Families, ChoicesTest,
                         ::testing::ValuesIn(::tandem::testing::kFamilyFixtures),
                         testing::FixtureTestName);

}  // namespace
}  // namespace tandem::engine
