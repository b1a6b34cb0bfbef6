// Request::checkpoint_hints: the state at a hinted prompt position is saved during prefill and
// kept by the prefix cache, so the first later request sharing the prefix up to that position
// restores from it (without a hint Marconi needs a second request to find the branch point and
// a third to use it). Restoring from a hinted checkpoint is bit-identical to a cold run on the
// batch-invariant CPU backend, hints never cost another request anything, and everything they
// take goes back to the allocator.
#include "engine/checkpoint_hints.h"

#include <string>
#include <vector>

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

Request Hinted(std::vector<int32_t> prompt, int32_t max_new_tokens, std::vector<size_t> hints) {
  Request r = GreedyWithLogprobs(std::move(prompt), max_new_tokens);
  r.checkpoint_hints = std::move(hints);
  return r;
}

SchedulerConfig Chunked() {
  SchedulerConfig config;
  config.prefill_chunk = 16;
  return config;
}

// The output a request gets with no cache at all.
Outcome Cold(const models::Model& model, const Request& request) {
  SchedulerHarness cold(model, CachePolicy::kNone, 64 * kMiB, Chunked());
  return cold.Run(request);
}

// Runs `first`, then `second` on one cached scheduler; `second` must give the cold run's
// tokens and logprobs, bit for bit (the batch-invariant CPU backend).
Outcome SecondAfterFirst(const models::Model& model, const Request& first, const Request& second) {
  SchedulerHarness h(model, CachePolicy::kMarconi, 64 * kMiB, Chunked());
  h.Run(first);
  const Outcome out = h.Run(second);
  const Outcome cold = Cold(model, second);
  EXPECT_EQ(out.tokens, cold.tokens);
  EXPECT_TRUE(SameLogprobs(out.logprobs, cold.logprobs)) << "restored state differs";
  return out;
}

// A chat's shape: a shared system prompt (37 tokens: inside a page, off the SSD chunk boundary),
// then per session a user message. Session 1 hints the end of the system prompt; session 2,
// the first other request to share it, already restores it.
TEST(CheckpointHintsTest, ANewSessionRestoresTheHintedSystemPromptOnItsFirstRequest) {
  ForEachFamily([](const models::Model& model, int32_t vocab) {
    const std::vector<int32_t> system = Tokens(37, 1, vocab);
    const std::vector<int32_t> first = Concat(system, Tokens(23, 11, vocab));
    const Request second = Hinted(Concat(system, Tokens(19, 12, vocab)), 6, {system.size()});
    const Outcome plain = SecondAfterFirst(model, Hinted(first, 4, {}), second);
    EXPECT_EQ(plain.finished.usage.cached_tokens, 0);
    const Outcome hinted =
        SecondAfterFirst(model, Hinted(first, 4, {system.size(), first.size()}), second);
    EXPECT_EQ(hinted.finished.usage.cached_tokens, 37);
  });
}

// Turn 2 of a chat renders turn 1's prompt, then the answer as the template writes it, which
// need not be the tokens the model sampled (a different tokenization of the same text, or a
// template that trims it). Without hints the cache holds turn 1's state only after its last
// computed token, so a prompt that departs anywhere inside the answer restores nothing. With
// the end of turn 1's prompt hinted, turn 2 restores all of it.
TEST(CheckpointHintsTest, TheNextTurnRestoresTheHintedEndOfTheRenderedPrompt) {
  ForEachFamily([](const models::Model& model, int32_t vocab) {
    const std::vector<int32_t> turn1 = Tokens(45, 21, vocab);
    // The re-rendered answer differs from the sampled tokens; then the next user message.
    const std::vector<int32_t> turn2 =
        Concat(Concat(turn1, Tokens(9, 22, vocab)), Tokens(14, 23, vocab));
    const Request next = Hinted(turn2, 5, {turn1.size(), turn2.size()});
    const Outcome plain = SecondAfterFirst(model, Hinted(turn1, 8, {}), next);
    EXPECT_EQ(plain.finished.usage.cached_tokens, 0);
    const Outcome hinted = SecondAfterFirst(model, Hinted(turn1, 8, {turn1.size()}), next);
    EXPECT_EQ(hinted.finished.usage.cached_tokens, 45);
  });
}

// When the next turn does continue the sampled tokens exactly, the state after the last
// computed token (every sampled token but the last, which was never run) serves it, hint or not.
TEST(CheckpointHintsTest, AnExactContinuationRestoresUpToTheLastComputedToken) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  SchedulerHarness h(*model, CachePolicy::kMarconi, 64 * kMiB);
  const std::vector<int32_t> turn1 = Tokens(30, 31, vocab);
  const Outcome a = h.Run(Hinted(turn1, 6, {turn1.size()}));
  const std::vector<int32_t> turn2 = Concat(Concat(turn1, a.tokens), Tokens(10, 32, vocab));
  const Outcome b = h.Run(Hinted(turn2, 3, {}));
  EXPECT_EQ(b.finished.usage.cached_tokens,
            static_cast<int64_t>(turn1.size() + a.tokens.size()) - 1);
}

// A position the tree already holds a state for takes no block and adds no node; everything
// the hints took is in the tree after the requests finish and back in the allocator once the
// tree lets go of it.
TEST(CheckpointHintsTest, HintsAreNotDuplicatedAndTheirMemoryComesBack) {
  ForEachFamily([](const models::Model& model, int32_t vocab) {
    SchedulerHarness h(model, CachePolicy::kMarconi, 64 * kMiB, Chunked());
    const size_t kv0 = h.used(cache::Pool::kKvPage), ssm0 = h.used(cache::Pool::kSsmBlock);
    const std::vector<int32_t> system = Tokens(37, 41, vocab);
    const std::vector<int32_t> prompt = Concat(system, Tokens(20, 42, vocab));
    const std::vector<size_t> hints = {10, system.size(), prompt.size()};
    h.Run(Hinted(prompt, 4, hints));
    const cache::PrefixCacheStats once = h.scheduler().stats().cache;
    EXPECT_EQ(once.hinted_positions, 3u);
    // The same prompt again: 37 restores (the deepest state before its last token); 57 is in the
    // tree already, so nothing is planned or offered twice.
    const Outcome again = h.Run(Hinted(prompt, 4, hints));
    EXPECT_EQ(again.finished.usage.cached_tokens, 37);
    const cache::PrefixCacheStats twice = h.scheduler().stats().cache;
    EXPECT_EQ(twice.hinted_positions, once.hinted_positions);
    // Only the end-of-sequence state is offered again (the tree has it): one rejection.
    EXPECT_EQ(twice.checkpoints_rejected, once.checkpoints_rejected + 1);
    EXPECT_EQ(twice.checkpoints, once.checkpoints);
    // Every unit in use is the tree's; dropping the tree returns the pools to their baseline.
    const SchedulerStats s = h.scheduler().stats();
    EXPECT_EQ(h.used(cache::Pool::kSsmBlock), ssm0 + s.cache.checkpoints);
    EXPECT_EQ(h.used(cache::Pool::kKvPage), kv0 + s.cache.kv_pages);
    h.scheduler().cache()->EvictAll();
    EXPECT_EQ(h.used(cache::Pool::kKvPage), kv0);
    EXPECT_EQ(h.used(cache::Pool::kSsmBlock), ssm0);
  });
}

// With no SSM block to spare, hinted states are skipped; the request runs as it would without
// them and nothing fails.
TEST(CheckpointHintsTest, HintsWithoutMemoryAreSkippedNotFailed) {
  auto model = LoadFixtureModel("mamba2-tiny");  // SSM blocks only: the budget counts them
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  const size_t block = model->layout().ssm_block_bytes();
  // Room for the live state and one more block: the state at the end of the sequence.
  SchedulerHarness h(*model, CachePolicy::kMarconi, 2 * block + block / 2);
  std::vector<size_t> hints;
  for (size_t p = 4; p <= 60; p += 4) hints.push_back(p);
  const Request r = Hinted(Tokens(60, 51, vocab), 4, hints);
  const Outcome out = h.Run(r);
  EXPECT_EQ(out.finished.finish_reason, FinishReason::kLength) << out.finished.error;
  EXPECT_EQ(out.tokens, Cold(*model, r).tokens);
  const SchedulerStats s = h.scheduler().stats();
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.cache.hinted_positions, hints.size());  // all planned …
  EXPECT_LE(s.cache.checkpoints, 2u);                 // … few kept: the pool holds two blocks
}

TEST(CheckpointHintsTest, BadHintsAreRefusedNamingTheEntry) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  SchedulerHarness h(*model, CachePolicy::kMarconi, 4 * kMiB);
  auto error = [&](std::vector<size_t> hints) {
    Request r = Hinted({5, 6, 7, 8}, 2, std::move(hints));
    const absl::Status s = h.scheduler().Validate(r);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    return std::string(s.message());
  };
  EXPECT_NE(error({0}).find("checkpoint_hints[0]"), std::string::npos);
  EXPECT_NE(error({2, 5}).find("checkpoint_hints[1]: position 5 is outside"), std::string::npos);
  EXPECT_NE(error({3, 2}).find("checkpoint_hints[1]: positions must be strictly ascending"),
            std::string::npos);
  EXPECT_NE(error({2, 2}).find("checkpoint_hints[1]"), std::string::npos);
  EXPECT_NE(error(std::vector<size_t>(kMaxCheckpointHints + 1, 1)).find("at most"),
            std::string::npos);
  Request fine = Hinted({5, 6, 7, 8}, 2, {1, 4});
  EXPECT_TRUE(h.scheduler().Validate(fine).ok());
}

}  // namespace
}  // namespace tandem::engine
