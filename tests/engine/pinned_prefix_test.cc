// Request::pin_prefix: a pinned prompt stays in the prefix cache through evictions that drop
// everything else, every later prompt that starts with it restores it (bit-identical to a cold
// run on the batch-invariant CPU backend), and once unpinned it is evictable again. Pins the
// engine cannot keep are refused with a precise error and leave nothing behind.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using testing::GreedyWithLogprobs;
using testing::LoadFixtureModel;
using testing::Outcome;
using testing::SameLogprobs;
using testing::SchedulerHarness;
using testing::Tokens;

constexpr size_t kMiB = size_t{1} << 20;

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Request Pin(std::vector<int32_t> prompt) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = 0;
  r.pin_prefix = true;
  return r;
}

SchedulerConfig Pinning(size_t max_pinned_bytes = 64 * kMiB) {
  SchedulerConfig config;
  config.prefill_chunk = 16;
  config.max_pinned_bytes = max_pinned_bytes;
  return config;
}

template <typename Test>
void ForEachFamily(Test test) {
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    test(*model, model->config().vocab_size);
  }
}

TEST(PinnedPrefixTest, APinnedPrefixOutlivesEvictionAndIsRestoredExactly) {
  ForEachFamily([](const models::Model& model, int32_t vocab) {
    // 37 tokens: inside a page and off the SSD chunk boundary.
    const std::vector<int32_t> system = Tokens(37, 1, vocab);
    const Request later = GreedyWithLogprobs(Concat(system, Tokens(9, 50, vocab)), 6);
    SchedulerHarness cold(model, CachePolicy::kNone, 64 * kMiB, Pinning());
    const Outcome expected = cold.Run(later);

    SchedulerHarness h(model, CachePolicy::kMarconi, 64 * kMiB, Pinning());
    const Outcome pinned = h.Run(Pin(system));
    ASSERT_EQ(pinned.finished.finish_reason, FinishReason::kLength) << pinned.finished.error;
    ASSERT_TRUE(pinned.finished.pinned_prefix.has_value());
    EXPECT_TRUE(pinned.tokens.empty());
    EXPECT_EQ(pinned.finished.usage.completion_tokens, 0);
    EXPECT_EQ(h.scheduler().stats().cache.pinned_prefixes, 1u);
    EXPECT_GT(h.scheduler().stats().cache.pinned_bytes, 0u);

    // Other traffic, then everything evictable goes.
    h.Run(GreedyWithLogprobs(Tokens(40, 300, vocab), 4));
    h.scheduler().cache()->EvictAll();
    EXPECT_EQ(h.scheduler().stats().cache.bytes, h.scheduler().stats().cache.pinned_bytes);

    const Outcome out = h.Run(later);
    EXPECT_EQ(out.finished.usage.cached_tokens, 37);
    EXPECT_EQ(out.tokens, expected.tokens);
    EXPECT_TRUE(SameLogprobs(out.logprobs, expected.logprobs)) << "restored state differs";

    // Unpinned, it is evictable like anything else, and all memory comes back.
    ASSERT_TRUE(h.scheduler().UnpinPrefix(*pinned.finished.pinned_prefix).ok());
    EXPECT_TRUE(absl::IsNotFound(h.scheduler().UnpinPrefix(*pinned.finished.pinned_prefix)));
    EXPECT_EQ(h.scheduler().stats().cache.pinned_prefixes, 0u);
    h.scheduler().cache()->EvictAll();
    EXPECT_EQ(h.used(cache::Pool::kKvPage), 0u);
    EXPECT_EQ(h.used(cache::Pool::kSsmBlock), 0u);
    EXPECT_EQ(h.Run(later).finished.usage.cached_tokens, 0);
  });
}

TEST(PinnedPrefixTest, RequestsThatCannotPinAreRefusedByName) {
  auto model = LoadFixtureModel("zamba2-tiny");
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> prompt = Tokens(20, 1, model->config().vocab_size);
  {
    SchedulerHarness no_cache(*model, CachePolicy::kNone, 64 * kMiB, Pinning());
    const absl::Status s = no_cache.scheduler().Validate(Pin(prompt));
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_NE(s.message().find("no prefix cache"), std::string::npos) << s;
  }
  SchedulerHarness off(*model, CachePolicy::kMarconi, 64 * kMiB, Pinning(0));
  EXPECT_TRUE(absl::IsFailedPrecondition(off.scheduler().Validate(Pin(prompt))));

  SchedulerHarness h(*model, CachePolicy::kMarconi, 64 * kMiB, Pinning());
  Request generates = Pin(prompt);
  generates.max_new_tokens = 3;
  EXPECT_TRUE(absl::IsInvalidArgument(h.scheduler().Validate(generates)));
  Request scores = Pin(prompt);
  scores.prompt_logprobs = 1;
  EXPECT_TRUE(absl::IsInvalidArgument(h.scheduler().Validate(scores)));
  // Without pin_prefix, generating nothing is still refused.
  Request nothing = GreedyWithLogprobs(prompt, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(h.scheduler().Validate(nothing)));
}

TEST(PinnedPrefixTest, APinOverTheByteLimitIsRefusedAndTheOthersStay) {
  auto model = LoadFixtureModel("zamba2-tiny");
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  // Learn what one 37-token prefix holds, then allow a little more than that.
  size_t one = 0;
  {
    SchedulerHarness probe(*model, CachePolicy::kMarconi, 64 * kMiB, Pinning());
    probe.Run(Pin(Tokens(37, 1, vocab)));
    one = probe.scheduler().stats().cache.pinned_bytes;
    ASSERT_GT(one, 0u);
  }
  SchedulerHarness h(*model, CachePolicy::kMarconi, 64 * kMiB, Pinning(one + one / 2));
  const Outcome first = h.Run(Pin(Tokens(37, 1, vocab)));
  ASSERT_TRUE(first.finished.pinned_prefix.has_value()) << first.finished.error;
  const Outcome second = h.Run(Pin(Tokens(37, 400, vocab)));
  EXPECT_EQ(second.finished.finish_reason, FinishReason::kError);
  EXPECT_TRUE(absl::IsResourceExhausted(second.finished.error)) << second.finished.error;
  EXPECT_NE(second.finished.error.message().find("pin_prefix: the pinned prefixes would hold"),
            std::string::npos)
      << second.finished.error;
  EXPECT_FALSE(second.finished.pinned_prefix.has_value());
  EXPECT_EQ(h.scheduler().stats().cache.pinned_prefixes, 1u);
  EXPECT_EQ(h.scheduler().stats().cache.pinned_bytes, one);
  // The refused prefix is cached like any request's prompt, but evictable.
  h.scheduler().cache()->EvictAll();
  EXPECT_EQ(h.scheduler().stats().cache.bytes, one);
}

}  // namespace
}  // namespace tandem::engine
