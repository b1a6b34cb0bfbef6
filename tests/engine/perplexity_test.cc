// engine::MeasurePerplexity on every family: a scored token's log-likelihood is, bit for bit, the
// prompt logprob the scheduler reports for it when a request scores the same window; windows are
// cut, scored and summed as documented; batching windows and the pass size change nothing; bad
// options and texts are refused by name.
#include "engine/perplexity.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/arena_allocator.h"
#include "engine/sequence_memory.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using testing::Backend;
using testing::LoadFixtureModel;
using testing::Outcome;
using testing::SchedulerHarness;
using testing::Tokens;

constexpr size_t kMiB = size_t{1} << 20;

class PerplexityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = LoadFixtureModel(GetParam());
    ASSERT_NE(model_, nullptr);
    vocab_ = model_->config().vocab_size;
    ops_ = testing::MakeOps(Backend::kCpu);
  }

  absl::StatusOr<PerplexityResult> Measure(const std::vector<int32_t>& text,
                                           const PerplexityOptions& options) {
    const int64_t context = options.context > 0
                                ? options.context
                                : static_cast<int64_t>(text.size() + options.prefix.size());
    const cache::ArenaConfig arena = ArenaForSequences(*model_, options.batch, context);
    auto allocator = cache::ArenaAllocator::Create(arena);
    EXPECT_TRUE(allocator.ok()) << allocator.status();
    return MeasurePerplexity(*model_, *ops_, **allocator, text, options);
  }

  // The negative log-likelihoods the scheduler gives the tokens of `window` from position
  // `score_from` on, summed in order, when one request scores it (prompt logprobs).
  double SchedulerNll(const std::vector<int32_t>& window, int64_t score_from) {
    Request r = testing::Greedy(window, 0);
    r.prompt_logprobs = 0;
    SchedulerHarness harness(*model_, CachePolicy::kNone, 64 * kMiB, testing::SmallSteps(),
                             Backend::kCpu, "avmp-dynamic", testing::SharingEveryPage());
    const Outcome got = harness.Run(std::move(r));
    EXPECT_EQ(got.prompt_logprobs.size(), window.size() - 1) << got.finished.error;
    double nll = 0;
    for (size_t p = static_cast<size_t>(score_from); p < window.size(); ++p) {
      EXPECT_EQ(got.prompt_logprobs[p - 1][0].token, window[p]);
      nll -= got.prompt_logprobs[p - 1][0].logprob;
    }
    return nll;
  }

  std::unique_ptr<models::Model> model_;
  std::unique_ptr<kernels::Ops> ops_;
  int32_t vocab_ = 0;
};

TEST_P(PerplexityTest, ScoresAreTheSchedulersPromptLogprobs) {
  const std::vector<int32_t> text = Tokens(100, 21, vocab_);
  PerplexityOptions options;
  options.context = 40;
  options.score_from = 11;
  options.prefix = {text[99]};  // a "BOS" the text does not start with
  options.chunk = 16;
  auto result = Measure(text, options);
  ASSERT_TRUE(result.ok()) << result.status();
  // 39 text tokens per window: two whole windows and one of 22 (scored from 11 too).
  ASSERT_EQ(result->windows.size(), 3u);
  double total = 0;
  for (size_t w = 0; w < 3; ++w) {
    SCOPED_TRACE(w);
    const WindowScore& got = result->windows[w];
    EXPECT_EQ(got.begin, static_cast<int64_t>(39 * w));
    EXPECT_EQ(got.text_tokens, w < 2 ? 39 : 22);
    EXPECT_EQ(got.scored_tokens, got.text_tokens + 1 - 11);
    std::vector<int32_t> window = options.prefix;
    window.insert(window.end(), text.begin() + got.begin,
                  text.begin() + got.begin + got.text_tokens);
    EXPECT_EQ(got.nll_sum, SchedulerNll(window, 11));
    total += got.nll_sum;
  }
  EXPECT_EQ(result->scored_tokens, 29 + 29 + 12);
  EXPECT_EQ(result->tokens_run, 39 + 39 + 22);  // each window but its last token
  EXPECT_DOUBLE_EQ(result->nll_sum, total);
  EXPECT_DOUBLE_EQ(result->perplexity(), std::exp(total / 70));
}

TEST_P(PerplexityTest, TheWholeTextIsOneWindow) {
  const std::vector<int32_t> text = Tokens(70, 22, vocab_);
  PerplexityOptions options;
  options.context = 0;
  auto result = Measure(text, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->windows.size(), 1u);
  EXPECT_EQ(result->context, 70);
  EXPECT_EQ(result->score_from, 1);  // every token but the first, which nothing predicts
  EXPECT_EQ(result->scored_tokens, 69);
  EXPECT_EQ(result->nll_sum, SchedulerNll(text, 1));
}

TEST_P(PerplexityTest, BatchAndPassSizeChangeNothing) {
  const std::vector<int32_t> text = Tokens(150, 23, vocab_);
  PerplexityOptions one;
  one.context = 32;  // score_from 16 by default
  one.prefix = {text[0]};
  auto alone = Measure(text, one);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->score_from, 16);
  PerplexityOptions batched = one;
  batched.batch = 3;
  batched.chunk = 5;
  auto together = Measure(text, batched);
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->windows.size(), alone->windows.size());
  // 31 text tokens per window: four whole and one of 26, which still reaches position 16.
  EXPECT_EQ(alone->windows.size(), 5u);
  for (size_t w = 0; w < alone->windows.size(); ++w) {
    EXPECT_EQ(together->windows[w].nll_sum, alone->windows[w].nll_sum) << w;
    EXPECT_EQ(together->windows[w].scored_tokens, alone->windows[w].scored_tokens) << w;
  }
  EXPECT_EQ(together->nll_sum, alone->nll_sum);
  EXPECT_EQ(together->nll_square_sum, alone->nll_square_sum);
}

INSTANTIATE_TEST_SUITE_P(Families, PerplexityTest,
                         ::testing::ValuesIn(::tandem::testing::kFamilyFixtures),
                         testing::FixtureTestName);

TEST(PerplexityWindowsTest, CutsTheTextIntoWindows) {
  PerplexityOptions options;
  options.context = 16;
  options.prefix = {1};
  // 15 text tokens per window; a last window of 5 (6 with the prefix) never reaches position 8.
  auto plan = PlanPerplexityWindows(50, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->context, 16);
  EXPECT_EQ(plan->score_from, 8);
  EXPECT_EQ(plan->count, 3);
  // One of 8 (9 with the prefix) does: position 8 is its last token.
  plan = PlanPerplexityWindows(53, options);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->count, 4);
  // A prefix is never scored: the default is at least past it.
  options.context = 4;
  options.prefix = {1, 2, 3};
  plan = PlanPerplexityWindows(10, options);
  ASSERT_FALSE(plan.ok());  // context 4 < 3 + 2
  options.context = 5;
  plan = PlanPerplexityWindows(10, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->score_from, 3);
  EXPECT_EQ(plan->count, 5);
  options.context = 0;
  plan = PlanPerplexityWindows(10, options);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->context, 13);
  EXPECT_EQ(plan->score_from, 3);
  EXPECT_EQ(plan->count, 1);
}

TEST(PerplexityWindowsTest, RefusesBadOptionsByName) {
  const auto message = [](int64_t tokens, const PerplexityOptions& options) {
    auto plan = PlanPerplexityWindows(tokens, options);
    EXPECT_FALSE(plan.ok());
    return plan.ok() ? std::string() : std::string(plan.status().message());
  };
  PerplexityOptions options;
  EXPECT_EQ(message(0, options), "the text has no tokens");
  options.context = 1;
  EXPECT_NE(message(10, options).find("context must be 0 (the whole text) or at least 2"),
            std::string::npos);
  options.context = 8;
  options.score_from = 8;
  EXPECT_NE(message(10, options).find("score_from must be in [1, 7]"), std::string::npos);
  options.score_from = 0;
  EXPECT_NE(message(10, options).find("score_from must be in [1, 7]"), std::string::npos);
  options.prefix = {1};
  options.score_from = 0;
  EXPECT_NE(message(10, options).find("got 0"), std::string::npos);
  options.score_from = -2;
  EXPECT_NE(message(10, options).find("or -1 for the default, got -2"), std::string::npos);
  options.score_from = -1;
  options.batch = 0;
  EXPECT_NE(message(10, options).find("batch must be in [1, 1024], got 0"), std::string::npos);
  options.batch = 1;
  options.chunk = 0;
  EXPECT_NE(message(10, options).find("chunk must be positive"), std::string::npos);
  options.chunk = 512;
  // One text token behind the prefix: position 4 is never reached.
  EXPECT_NE(message(1, options).find("the text's 1 tokens leave nothing to score"),
            std::string::npos);
}

TEST(PerplexityResultTest, MeanPerplexityAndStandardError) {
  PerplexityResult result;
  // Token NLLs 1, 2, 3: mean 2, sample variance 1, standard error 1 / sqrt(3).
  result.scored_tokens = 3;
  result.nll_sum = 6;
  result.nll_square_sum = 14;
  EXPECT_DOUBLE_EQ(result.mean_nll(), 2);
  EXPECT_DOUBLE_EQ(result.perplexity(), std::exp(2.0));
  EXPECT_DOUBLE_EQ(result.mean_nll_stderr(), 1 / std::sqrt(3.0));
  EXPECT_DOUBLE_EQ(result.perplexity_stderr(), std::exp(2.0) / std::sqrt(3.0));
  PerplexityResult empty;
  EXPECT_EQ(empty.mean_nll(), 0);
  EXPECT_EQ(empty.mean_nll_stderr(), 0);
}

TEST(PerplexityTokensTest, ATokenOutsideTheVocabularyIsNamed) {
  auto model = LoadFixtureModel("mamba2-tiny");
  ASSERT_NE(model, nullptr);
  auto ops = testing::MakeOps(Backend::kCpu);
  const cache::ArenaConfig arena = ArenaForSequences(*model, 1, 10);
  auto allocator = cache::ArenaAllocator::Create(arena);
  ASSERT_TRUE(allocator.ok());
  std::vector<int32_t> text = Tokens(20, 1, model->config().vocab_size);
  text[7] = model->config().vocab_size;
  PerplexityOptions options;
  options.context = 10;
  auto result = MeasurePerplexity(*model, *ops, **allocator, text, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "text token 7 is " + std::to_string(text[7]) +
                                           ", outside the vocabulary [0, " +
                                           std::to_string(text[7]) + ")");
  text[7] = 1;
  options.prefix = {-2};
  result = MeasurePerplexity(*model, *ops, **allocator, text, options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("prefix token 0 is -2"), std::string::npos);
}

}  // namespace
}  // namespace tandem::engine
