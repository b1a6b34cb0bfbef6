// Usage::reasoning_tokens: the reasoning block's tokens counted on ids (engine/reasoning_tokens.h),
// alone and as the scheduler reports them when a request finishes.
#include "engine/reasoning_tokens.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::Greedy;
using testing::LoadFixtureModel;
using testing::SchedulerHarness;
using testing::Tokens;

constexpr int32_t kStart = 7, kEnd = 9;

std::optional<int64_t> Count(bool opened, const std::vector<int32_t>& output) {
  return CountReasoningTokens(ReasoningBlock{kStart, kEnd, opened}, output);
}

TEST(ReasoningTokensTest, AnOpenedBlockRunsThroughItsFirstEndMarker) {
  EXPECT_EQ(Count(true, {1, 2, kEnd, 3, kEnd, 4}), 3);
  EXPECT_EQ(Count(true, {kEnd, 3}), 1);             // an empty block: the marker alone
  EXPECT_EQ(Count(true, {kStart, 1, kEnd, 2}), 3);  // a repeated start marker is reasoning
}

TEST(ReasoningTokensTest, WithoutAnOpenedBlockOnlyAFirstStartMarkerOpensOne) {
  EXPECT_EQ(Count(false, {kStart, 1, kEnd, 2}), 3);
  EXPECT_EQ(Count(false, {kStart, kEnd}), 2);
  EXPECT_EQ(Count(false, {1, kStart, 2, kEnd, 3}), 0);  // later: all answer
  EXPECT_EQ(Count(false, {1, 2, kEnd}), 0);
  EXPECT_EQ(Count(false, {}), 0);
}

TEST(ReasoningTokensTest, AnOutputCutOffInsideTheBlockIsAllReasoning) {
  EXPECT_EQ(Count(true, {1, 2, 3}), 3);
  EXPECT_EQ(Count(true, {}), 0);
  EXPECT_EQ(Count(false, {kStart, 1, 2}), 3);
  EXPECT_EQ(Count(false, {kStart}), 1);
}

// -1: a marker that is not a single token. Unknown only where the output needs that marker.
TEST(ReasoningTokensTest, AMarkerThatIsNotOneTokenLeavesTheCountUnknownWhereItIsNeeded) {
  const std::vector<int32_t> started = {kStart, 1, kEnd, 2}, plain = {1, kEnd, 2};
  EXPECT_EQ(CountReasoningTokens(ReasoningBlock{-1, kEnd, true}, plain), 2);  // start unused
  EXPECT_EQ(CountReasoningTokens(ReasoningBlock{-1, kEnd, false}, plain), std::nullopt);
  EXPECT_EQ(CountReasoningTokens(ReasoningBlock{kStart, -1, true}, plain), std::nullopt);
  EXPECT_EQ(CountReasoningTokens(ReasoningBlock{kStart, -1, false}, started), std::nullopt);
  EXPECT_EQ(CountReasoningTokens(ReasoningBlock{kStart, -1, false}, plain), 0);  // no block
}

// The scheduler counts over the tokens a request generated: markers picked from a greedy run's
// own output land where that run puts them.
TEST(ReasoningTokensTest, AFinishedRequestReportsItsReasoningTokens) {
  auto model = LoadFixtureModel("mamba2-tiny");
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> prompt = Tokens(24, 3, model->config().vocab_size);
  auto run = [&](std::optional<ReasoningBlock> block) {
    SchedulerHarness harness(*model, CachePolicy::kNone, 32 << 20);
    Request request = Greedy(prompt, 8);
    request.reasoning_block = block;
    return harness.Run(std::move(request));
  };
  const testing::Outcome plain = run(std::nullopt);
  ASSERT_EQ(plain.tokens.size(), 8u);
  EXPECT_EQ(plain.finished.usage.reasoning_tokens, 0);
  const std::vector<int32_t>& out = plain.tokens;
  auto first = [&](int32_t id, size_t from) {
    return static_cast<int64_t>(std::find(out.begin() + from, out.end(), id) - out.begin());
  };

  const testing::Outcome opened = run(ReasoningBlock{kStart, out[3], true});
  EXPECT_EQ(opened.tokens, out);
  EXPECT_EQ(opened.finished.usage.reasoning_tokens, first(out[3], 0) + 1);

  const testing::Outcome started = run(ReasoningBlock{out[0], out[5], false});
  EXPECT_EQ(started.finished.usage.reasoning_tokens, first(out[5], 1) + 1);

  const int32_t not_first = out[0] == kStart ? kEnd : kStart;
  EXPECT_EQ(run(ReasoningBlock{not_first, out[5], false}).finished.usage.reasoning_tokens, 0);
  EXPECT_EQ(run(ReasoningBlock{kStart, -1, true}).finished.usage.reasoning_tokens, std::nullopt);
}

}  // namespace
}  // namespace tandem::engine
