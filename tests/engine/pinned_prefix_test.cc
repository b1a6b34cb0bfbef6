// Request::pin_prefix: a pinned prompt stays in the prefix cache through evictions that drop
// everything else, every later prompt that starts with it restores it (bit-identical to a cold
// run on the batch-invariant CPU backend), and once unpinned it is evictable again. Pins the
// engine cannot keep are refused with a precise error and leave nothing behind.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using testing::Concat;
using testing::ForEachFamily;
using testing::GreedyWithLogprobs;
using testing::LoadFixtureModel;
using testing::Outcome;
using testing::SameLogprobs;
using testing::SchedulerHarness;
using testing::Tokens;

constexpr size_t kMiB = size_t{1} << 20;

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
    EXPECT_NE(s.message().find("needs a prefix cache"), std::string::npos) << s;
  }
  SchedulerHarness off(*model, CachePolicy::kMarconi, 64 * kMiB, Pinning(0));
  EXPECT_TRUE(absl::IsFailedPrecondition(off.scheduler().Validate(Pin(prompt))));

  SchedulerHarness h(*model, CachePolicy::kMarconi, 64 * kMiB, Pinning());
  Request generates = Pin(prompt);
  generates.max_new_tokens = 3;
  EXPECT_EQ(h.scheduler().Validate(generates).message(),
            "max_new_tokens: must be 0 for a request that pins its prompt, got 3");
  Request scores = Pin(prompt);
  scores.prompt_logprobs = 1;
  EXPECT_EQ(h.scheduler().Validate(scores).message(),
            "prompt_logprobs: not allowed for a request that pins its prompt");
  // A prefix that alone holds more than pins may is refused before it costs a prefill.
  SchedulerHarness tight(*model, CachePolicy::kMarconi, 64 * kMiB, Pinning(1024));
  const absl::Status too_big = tight.scheduler().Validate(Pin(prompt));
  EXPECT_TRUE(absl::IsResourceExhausted(too_big)) << too_big;
  EXPECT_NE(too_big.message().find("allowed for pinned prefixes"), std::string::npos) << too_big;
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
  EXPECT_NE(second.finished.error.message().find(
                "the prefix was not pinned: the pinned prefixes would hold"),
            std::string::npos)
      << second.finished.error;
  EXPECT_FALSE(second.finished.pinned_prefix.has_value());
  EXPECT_EQ(h.scheduler().stats().cache.pinned_prefixes, 1u);
  EXPECT_EQ(h.scheduler().stats().cache.pinned_bytes, one);
  // The refused prefix is cached like any request's prompt, but evictable.
  h.scheduler().cache()->EvictAll();
  EXPECT_EQ(h.scheduler().stats().cache.bytes, one);
}

// Through the Engine: one choice only, and UnpinPrefix (queued to the engine's thread) releases
// the pin before a later step.
TEST(PinnedPrefixTest, TheEnginePinsWithOneChoiceAndUnpinsOnItsThread) {
  auto model = LoadFixtureModel("zamba2-tiny");
  ASSERT_NE(model, nullptr);
  EngineConfig config;
  config.memory_bytes = 64 * kMiB;
  config.threads = 2;
  config.scheduler = Pinning();
  auto engine = Engine::Create(*model, nullptr, config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const Request pin = Pin(Tokens(37, 1, model->config().vocab_size));
  auto two = (*engine)->SubmitChoices(pin, 2);
  EXPECT_TRUE(absl::IsInvalidArgument(two.status())) << two.status();
  auto stream = (*engine)->Submit(pin);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const Outcome pinned = testing::Drain(**stream);
  ASSERT_TRUE(pinned.finished.pinned_prefix.has_value()) << pinned.finished.error;
  EXPECT_EQ((*engine)->stats().cache.pinned_prefixes, 1u);
  (*engine)->UnpinPrefix(*pinned.finished.pinned_prefix);
  (*engine)->UnpinPrefix(12345);  // unknown: ignored
  // The loop runs the unpins, then a step, then publishes its stats (after the step's events:
  // poll; the bound only keeps a broken engine from hanging the suite).
  auto after = (*engine)->Submit(GreedyWithLogprobs(Tokens(10, 2, model->config().vocab_size), 2));
  ASSERT_TRUE(after.ok());
  testing::Drain(**after);
  for (int i = 0; i < 5000 && (*engine)->stats().cache.pinned_prefixes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ((*engine)->stats().cache.pinned_prefixes, 0u);
}

}  // namespace
}  // namespace tandem::engine
