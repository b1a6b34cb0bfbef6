// The scheduler's central property: a request's output does not depend on whether it hit the prefix
// cache, shared a batch, or was preempted and resumed (docs/ARCHITECTURE.md, "Exactness contracts":
// same greedy tokens). Also admission, Marconi's checkpoints in the loop, cancellation and memory
// accounting.
#include "engine/scheduler.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/json_file.h"
#include "models/tokenizer.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using testing::Drain;
using testing::Greedy;
using testing::LoadFixtureModel;
using testing::Outcome;
using testing::SchedulerHarness;
using testing::Tokens;

constexpr size_t kMiB = size_t{1} << 20;

// Everything the tree holds, in allocator units: what pool usage returns to once idle.
size_t CacheUnits(Scheduler& s, cache::Pool pool) {
  const cache::PrefixCacheStats c = s.stats().cache;
  return pool == cache::Pool::kKvPage ? c.kv_pages : c.checkpoints;
}

TEST(SchedulerStatsTest, MemoryUsageRatioCountsSequencesNotTheCache) {
  SchedulerStats stats;
  EXPECT_EQ(stats.memory_usage_ratio(), 0.0);  // no pools yet
  stats.memory.pools[0] = {.unit_bytes = 100, .used_units = 6, .capacity_units = 10};
  stats.memory.pools[1] = {.unit_bytes = 1000, .used_units = 1, .capacity_units = 1};
  stats.cache.bytes = 300;  // 3 of the 6 KV pages are the cache's
  EXPECT_DOUBLE_EQ(stats.memory_usage_ratio(), (600 + 1000 - 300) / 2000.0);
  stats.cache.bytes = 1600;  // everything used is the cache's
  EXPECT_EQ(stats.memory_usage_ratio(), 0.0);
}

TEST(SchedulerTest, MatchesTheTransformersGreedyTokensForEveryFamily) {
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    auto manifest =
        models::ReadJsonFile(testing::Fixture(std::string("reference/") + name + "/manifest.json"));
    ASSERT_TRUE(manifest.ok());
    const auto& c = (*manifest)["cases"][3];  // 80 tokens
    SchedulerConfig config;
    config.prefill_chunk = 24;
    for (CachePolicy policy : {CachePolicy::kNone, CachePolicy::kMarconi}) {
      SchedulerHarness h(*model, policy, 64 * kMiB, config);
      Outcome out = h.Run(Greedy(c["prompt_ids"].get<std::vector<int32_t>>(), 8));
      EXPECT_EQ(out.tokens, c["greedy_ids"].get<std::vector<int32_t>>());
      EXPECT_EQ(out.finished.finish_reason, FinishReason::kLength);
      EXPECT_EQ(out.finished.usage.prompt_tokens, 80);
      EXPECT_EQ(out.finished.usage.completion_tokens, 8);
    }
  }
}

TEST(SchedulerTest, BatchedRequestsGiveTheirSoloOutputs) {
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    const int32_t vocab = model->config().vocab_size;
    SchedulerConfig config;
    config.prefill_chunk = 20;
    config.step_tokens = 48;  // decode rows and prefill chunks share steps
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 6; ++i) prompts.push_back(Tokens(5 + 17 * i, i, vocab));

    std::vector<std::vector<int32_t>> solo;
    for (const auto& p : prompts) {
      SchedulerHarness h(*model, CachePolicy::kNone, 64 * kMiB, config);
      solo.push_back(h.Run(Greedy(p, 12)).tokens);
    }
    SchedulerHarness h(*model, CachePolicy::kNone, 64 * kMiB, config);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& p : prompts) streams.push_back(h.Add(Greedy(p, 12)));
    h.RunUntilIdle();
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(Drain(*streams[i]).tokens, solo[i]) << "request " << i;
    }
    EXPECT_EQ(h.used(cache::Pool::kKvPage), 0u);
    EXPECT_EQ(h.used(cache::Pool::kSsmBlock), 0u);
  }
}

// One sequence's greedy output alone and inside a batch of 32 whose members are at every stage
// (long and short prompts, chunked prefills beside decodes).
TEST(SchedulerTest, OutputAloneEqualsOutputInABatchOf32) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  SchedulerConfig config;
  config.prefill_chunk = 16;
  config.step_tokens = 256;
  config.max_running = 32;
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 32; ++i) prompts.push_back(Tokens(1 + (i * 37) % 90, 200 + i, vocab));
  SchedulerHarness batch(*model, CachePolicy::kNone, 64 * kMiB, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) streams.push_back(batch.Add(testing::GreedyWithLogprobs(p, 10)));
  batch.RunUntilIdle();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SchedulerHarness solo(*model, CachePolicy::kNone, 64 * kMiB, config);
    const Outcome in_batch = Drain(*streams[i]);
    const Outcome alone = solo.Run(testing::GreedyWithLogprobs(prompts[i], 10));
    EXPECT_EQ(in_batch.tokens, alone.tokens) << i;
    // The engine's backend is batch-invariant and these prompts share no pages (no Hydragen):
    // the logits are the same bits alone and among 31 others.
    EXPECT_TRUE(testing::SameLogprobs(in_batch.logprobs, alone.logprobs)) << i;
  }
}

// Turn 2 of a conversation restores turn 1's state (the checkpoint after its last computed
// token) and must produce exactly what a cold run produces.
TEST(SchedulerTest, MultiTurnCacheHitEqualsMiss) {
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    const int32_t vocab = model->config().vocab_size;
    SchedulerConfig config;
    config.prefill_chunk = 32;
    for (CachePolicy policy : {CachePolicy::kSglangPlus, CachePolicy::kMarconi}) {
      SCOPED_TRACE(CachePolicyName(policy));
      SchedulerHarness warm(*model, policy, 64 * kMiB, config);
      std::vector<int32_t> history = Tokens(45, 7, vocab);
      for (int turn = 0; turn < 3; ++turn) {
        SCOPED_TRACE(turn);
        Outcome hot = warm.Run(Greedy(history, 6));
        SchedulerHarness cold(*model, CachePolicy::kNone, 64 * kMiB, config);
        Outcome miss = cold.Run(Greedy(history, 6));
        EXPECT_EQ(hot.tokens, miss.tokens);
        EXPECT_EQ(miss.finished.usage.cached_tokens, 0);
        if (turn > 0) {
          // Everything the previous turn computed: its prompt and all but its last token.
          EXPECT_EQ(hot.finished.usage.cached_tokens,
                    static_cast<int64_t>(history.size()) - 1 - 29);
        } else {
          EXPECT_EQ(hot.finished.usage.cached_tokens, 0);
        }
        history.insert(history.end(), hot.tokens.begin(), hot.tokens.end());
        const std::vector<int32_t> user = Tokens(29, 100 + turn, vocab);
        history.insert(history.end(), user.begin(), user.end());
      }
      // Idle: the pools hold exactly what the tree holds.
      EXPECT_EQ(warm.used(cache::Pool::kKvPage),
                CacheUnits(warm.scheduler(), cache::Pool::kKvPage));
      EXPECT_EQ(warm.used(cache::Pool::kSsmBlock),
                CacheUnits(warm.scheduler(), cache::Pool::kSsmBlock));
      EXPECT_GT(warm.scheduler().stats().cached_tokens, 0u);
    }
  }
}

// Marconi's speculative insertion: B diverges from A inside A's edge, so B's prefill saves the
// state at the branch point; C, which shares the same prefix, then restores it. The branch
// position (37) is inside a page and inside an SSD chunk.
TEST(SchedulerTest, BranchPointCheckpointIsTakenInPrefillAndReused) {
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    const int32_t vocab = model->config().vocab_size;
    const std::vector<int32_t> shared = Tokens(37, 1, vocab);
    auto with = [&](uint32_t seed) {
      std::vector<int32_t> p = shared;
      const std::vector<int32_t> tail = Tokens(23, seed, vocab);
      p.insert(p.end(), tail.begin(), tail.end());
      return p;
    };
    SchedulerConfig config;
    config.prefill_chunk = 16;
    SchedulerHarness h(*model, CachePolicy::kMarconi, 64 * kMiB, config);
    Outcome a = h.Run(Greedy(with(11), 4));
    Outcome b = h.Run(Greedy(with(12), 4));
    EXPECT_EQ(b.finished.usage.cached_tokens, 0);  // matched 37 tokens, but no state there yet
    EXPECT_EQ(h.scheduler().stats().hit_without_checkpoint, 37u);
    Outcome c = h.Run(Greedy(with(13), 4));
    EXPECT_EQ(c.finished.usage.cached_tokens, 37);
    SchedulerHarness cold(*model, CachePolicy::kNone, 64 * kMiB, config);
    EXPECT_EQ(c.tokens, cold.Run(Greedy(with(13), 4)).tokens);
    EXPECT_EQ(b.tokens, cold.Run(Greedy(with(12), 4)).tokens);
    (void)a;
  }
}

// With memory for only a few sequences at a time, requests are preempted and resumed; their
// outputs do not change.
TEST(SchedulerTest, PreemptedRequestsResumeWithTheSameOutput) {
  for (const char* name : {"jamba-tiny", "zamba2-tiny"}) {
    SCOPED_TRACE(name);
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    const int32_t vocab = model->config().vocab_size;
    SchedulerConfig config;
    config.prefill_chunk = 16;
    config.step_tokens = 64;
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 6; ++i) prompts.push_back(Tokens(20 + 3 * i, 50 + i, vocab));
    std::vector<Outcome> solo;
    for (const auto& p : prompts) {
      SchedulerHarness h(*model, CachePolicy::kNone, 64 * kMiB, config);
      solo.push_back(h.Run(testing::GreedyWithLogprobs(p, 40)));
    }
    // Room for about two sequences' KV (each grows to ≈ 4 pages) next to their SSM blocks.
    const models::StateLayout& layout = model->layout();
    for (CachePolicy policy : {CachePolicy::kNone, CachePolicy::kMarconi}) {
      SCOPED_TRACE(CachePolicyName(policy));
      const size_t budget = 10 * layout.kv_page_bytes() + 8 * layout.ssm_block_bytes();
      // SGLang's ratio is SSM bytes : KV bytes.
      const double ratio = (8.0 * layout.ssm_block_bytes()) / (10.0 * layout.kv_page_bytes());
      SchedulerHarness h(*model, policy, budget + 4096, config, testing::Backend::kCpu,
                         "fixed-dual:" + std::to_string(ratio));
      ASSERT_LE(h.allocator().stats(cache::Pool::kKvPage).capacity_units, 11u);
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (const auto& p : prompts) streams.push_back(h.Add(testing::GreedyWithLogprobs(p, 40)));
      bool saw_preempted = false;  // a preempted request waits in the queue, saying so
      for (int i = 0; i < 100000 && !h.scheduler().idle(); ++i) {
        h.scheduler().Step();
        for (const auto& stream : streams) {
          saw_preempted |= h.scheduler().status_of(stream->id()) == SequenceStatus::kPreempted;
        }
      }
      ASSERT_TRUE(h.scheduler().idle());
      EXPECT_TRUE(saw_preempted);
      int preemptions = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        Outcome out = Drain(*streams[i]);
        EXPECT_EQ(out.finished.finish_reason, FinishReason::kLength) << out.finished.error;
        EXPECT_EQ(out.tokens, solo[i].tokens) << "request " << i;
        // Resumed by prefill over what it had decoded, on the batch-invariant backend: the same
        // bits as the uninterrupted run.
        EXPECT_TRUE(testing::SameLogprobs(out.logprobs, solo[i].logprobs)) << "request " << i;
        preemptions += out.finished.usage.preemptions;
      }
      EXPECT_GT(preemptions, 0);
      EXPECT_EQ(h.scheduler().stats().preemptions, static_cast<uint64_t>(preemptions));
      EXPECT_EQ(h.used(cache::Pool::kKvPage), CacheUnits(h.scheduler(), cache::Pool::kKvPage));
      EXPECT_EQ(h.used(cache::Pool::kSsmBlock), CacheUnits(h.scheduler(), cache::Pool::kSsmBlock));
    }
  }
}

// Prompts in chunks of 16, one request running at a time: a second one stays queued.
SchedulerConfig OneAtATime() {
  SchedulerConfig config;
  config.prefill_chunk = 16;
  config.max_running = 1;
  return config;
}

// A request's status at each phase: queued, running its prompt in chunks, generating, gone once
// finished.
TEST(SchedulerTest, StatusFollowsEachPhase) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  SchedulerHarness h(*model, CachePolicy::kNone, 64 * kMiB, OneAtATime());
  auto first = h.Add(Greedy(Tokens(40, 3, vocab), 5));
  auto second = h.Add(Greedy(Tokens(40, 4, vocab), 5));
  auto status = [&](const std::shared_ptr<RequestStream>& s) {
    return h.scheduler().status_of(s->id());
  };
  EXPECT_EQ(status(first), SequenceStatus::kWaiting);
  h.scheduler().Step();  // prompt tokens 0..16
  EXPECT_EQ(status(first), SequenceStatus::kPrefilling);
  EXPECT_EQ(status(second), SequenceStatus::kWaiting);
  h.scheduler().Step();  // 16..32
  EXPECT_EQ(status(first), SequenceStatus::kPrefilling);
  h.scheduler().Step();  // 32..40, then the first token
  EXPECT_EQ(status(first), SequenceStatus::kDecoding);
  for (int i = 0; i < 4; ++i) h.scheduler().Step();  // tokens 2..5: finished
  EXPECT_EQ(status(first), std::nullopt);
  EXPECT_EQ(Drain(*first).tokens.size(), 5u);
  h.scheduler().Step();
  EXPECT_EQ(status(second), SequenceStatus::kPrefilling);
  EXPECT_TRUE(h.scheduler().Cancel(second->id()));
  EXPECT_EQ(status(second), std::nullopt);
}

// Cancelling at any moment frees everything the request held.
TEST(SchedulerTest, CancelInEveryPhaseReturnsPoolsToTheirBaseline) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  for (CachePolicy policy : {CachePolicy::kNone, CachePolicy::kMarconi}) {
    SCOPED_TRACE(CachePolicyName(policy));
    SchedulerHarness h(*model, policy, 64 * kMiB, OneAtATime());
    h.Run(Greedy(Tokens(40, 3, vocab), 3));  // something cached (for marconi)
    const size_t kv0 = h.used(cache::Pool::kKvPage), ssm0 = h.used(cache::Pool::kSsmBlock);
    // step 0: queued; step 1: prefilling (first chunk done); step 4: decoding.
    for (int steps : {0, 1, 4}) {
      SCOPED_TRACE(steps);
      auto running = h.Add(Greedy(Tokens(40, 4, vocab), 50));
      auto queued = h.Add(Greedy(Tokens(40, 5, vocab), 50));
      for (int i = 0; i < steps; ++i) h.scheduler().Step();
      EXPECT_TRUE(h.scheduler().Cancel(queued->id()));
      EXPECT_TRUE(h.scheduler().Cancel(running->id()));
      EXPECT_FALSE(h.scheduler().Cancel(running->id()));
      EXPECT_EQ(Drain(*running).finished.finish_reason, FinishReason::kCancelled);
      EXPECT_EQ(Drain(*queued).finished.finish_reason, FinishReason::kCancelled);
      EXPECT_TRUE(h.scheduler().idle());
      EXPECT_EQ(h.used(cache::Pool::kKvPage), kv0);
      EXPECT_EQ(h.used(cache::Pool::kSsmBlock), ssm0);
    }
  }
}

TEST(SchedulerTest, StopTokensAndEosEndGeneration) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  SchedulerHarness h(*model, CachePolicy::kNone, 64 * kMiB);
  const std::vector<int32_t> prompt = Tokens(30, 9, model->config().vocab_size);
  const Outcome free_run = h.Run(Greedy(prompt, 8));
  ASSERT_EQ(free_run.tokens.size(), 8u);
  Request r = Greedy(prompt, 8);
  r.stop_token_ids = {free_run.tokens[3]};
  const Outcome stopped = h.Run(r);
  // Generation ends at the first occurrence of the stop id, which is kept in the output.
  const auto first = std::find(free_run.tokens.begin(), free_run.tokens.end(), free_run.tokens[3]);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free_run.tokens.begin(), first + 1));
  EXPECT_EQ(stopped.finished.finish_reason, FinishReason::kStop);
}

TEST(SchedulerTest, RejectsBadRequestsNamingTheField) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  SchedulerHarness h(*model, CachePolicy::kMarconi, 4 * kMiB);
  auto error = [&](Request r) { return std::string(h.scheduler().Validate(r).message()); };
  EXPECT_NE(error(Greedy({}, 4)).find("prompt: no tokens"), std::string::npos);
  EXPECT_NE(error(Greedy({5, 1024}, 4)).find("prompt[1]"), std::string::npos);
  EXPECT_NE(error(Greedy({5, -1}, 4)).find("prompt[1]"), std::string::npos);
  EXPECT_NE(error(Greedy({5}, 0)).find("max_new_tokens"), std::string::npos);
  Request r = Greedy({5}, 4);
  r.sampling.greedy = false;
  r.sampling.temperature = -1;
  EXPECT_NE(error(r).find("temperature"), std::string::npos);
  r = Greedy({5}, 4);
  r.sampling.top_logprobs = 21;
  EXPECT_NE(error(r).find("top_logprobs"), std::string::npos);
  r = Greedy({5}, 4);
  r.stop_strings = {"x"};
  EXPECT_NE(error(r).find("stop_strings"), std::string::npos);
  // Larger than the memory can ever hold.
  const absl::Status huge = h.scheduler().Validate(Greedy(std::vector<int32_t>(20000, 5), 4000));
  EXPECT_TRUE(absl::IsResourceExhausted(huge)) << huge;
}

}  // namespace
}  // namespace tandem::engine

namespace tandem::engine {
namespace {

// With a tokenizer, events carry text: all deltas together are the decoded output continuing
// the prompt's text, and a stop string ends the text right before it.
TEST(SchedulerTextTest, TextDeltasAndStopStrings) {
  auto model = testing::LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  auto tokenizer = models::LoadTokenizer(testing::Fixture("tokenizers/tiny-spm"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto spec = CacheModelSpecFor(model->config(), "fixture");
  ASSERT_TRUE(spec.ok());
  cache::AllocatorOptions options;
  options.budget_bytes = 16 << 20;
  options.backing = cache::BackingKind::kHost;
  auto named = cache::CreateAllocator("avmp-dynamic", *spec, options);
  ASSERT_TRUE(named.ok());
  ModelRunner runner(*model, kernels::MakeCpuOps(2));
  Scheduler scheduler(*model, tokenizer->get(), named->allocator.get(), *spec, &runner, {});
  auto run = [&](Request r, std::string* text) {
    auto stream = std::make_shared<RequestStream>(1);
    EXPECT_TRUE(scheduler.Validate(r).ok()) << scheduler.Validate(r);
    scheduler.Add(1, std::move(r), stream, Clock::now());
    while (!scheduler.idle()) scheduler.Step();
    Event e, last;
    std::vector<int32_t> tokens;
    while (stream->Next(&e)) {
      text->append(e.text);
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      last = e;
    }
    return std::make_pair(tokens, last);
  };
  auto encoded = (*tokenizer)->Encode("The quick brown fox", true);
  ASSERT_TRUE(encoded.ok());
  const std::vector<int32_t> prompt = *encoded;
  std::string text;
  auto [tokens, finished] = run(testing::Greedy(prompt, 24), &text);
  ASSERT_EQ(tokens.size(), 24u);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), tokens.begin(), tokens.end());
  const std::string whole = (*tokenizer)->Decode(all, true);
  const std::string head = (*tokenizer)->Decode(prompt, true);
  ASSERT_EQ(whole.compare(0, head.size(), head), 0);
  EXPECT_EQ(text, whole.substr(head.size()));

  // A stop string taken from the middle of that text.
  ASSERT_GE(text.size(), 8u);
  const std::string stop = text.substr(text.size() / 2, 3);
  Request r = testing::Greedy(prompt, 24);
  r.stop_strings = {stop};
  std::string stopped_text;
  auto [stopped_tokens, stopped] = run(r, &stopped_text);
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.stop_string, stop);
  EXPECT_EQ(stopped_text, text.substr(0, text.find(stop)));
  EXPECT_LE(stopped_tokens.size(), tokens.size());
  EXPECT_EQ(named->allocator->stats(cache::Pool::kKvPage).used_units,
            scheduler.stats().cache.kv_pages);
}

}  // namespace
}  // namespace tandem::engine

namespace tandem::engine {
namespace {

// A request that passes validation but cannot fit the KV pool it would get (a static split
// leaves the KV pool a fraction of the budget) fails with RESOURCE_EXHAUSTED, frees everything,
// and does not disturb the request running beside it.
TEST(SchedulerExhaustionTest, AnOversizedRequestFailsAloneAndFreesEverything) {
  auto model = testing::LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  const models::StateLayout& layout = model->layout();
  // 6 KV pages (96 positions) and 6 SSM blocks.
  const double ratio = (6.0 * layout.ssm_block_bytes()) / (6.0 * layout.kv_page_bytes());
  const size_t budget = 6 * layout.kv_page_bytes() + 6 * layout.ssm_block_bytes() + 4096;
  SchedulerConfig config;
  config.prefill_chunk = 16;
  for (CachePolicy policy : {CachePolicy::kNone, CachePolicy::kMarconi}) {
    SCOPED_TRACE(CachePolicyName(policy));
    testing::SchedulerHarness h(*model, policy, budget, config, testing::Backend::kCpu,
                                "fixed-dual:" + std::to_string(ratio));
    ASSERT_LE(h.allocator().stats(cache::Pool::kKvPage).capacity_units, 6u);
    const int32_t vocab = model->config().vocab_size;
    // Fits: 20 + 8 positions. Does not: a 120-token prompt (8 pages) — refused at admission —
    // and a 40-token prompt that grows past 96 positions while decoding.
    auto small = h.Add(testing::Greedy(Tokens(20, 1, vocab), 8));
    auto big_prompt = h.Add(testing::Greedy(Tokens(120, 2, vocab), 4));
    auto big_decode = h.Add(testing::Greedy(Tokens(40, 3, vocab), 80));
    h.RunUntilIdle();
    const Outcome ok = Drain(*small);
    EXPECT_EQ(ok.finished.finish_reason, FinishReason::kLength);
    EXPECT_EQ(ok.tokens.size(), 8u);
    for (auto* stream : {big_prompt.get(), big_decode.get()}) {
      const Outcome failed = Drain(*stream);
      EXPECT_EQ(failed.finished.finish_reason, FinishReason::kError);
      EXPECT_TRUE(absl::IsResourceExhausted(failed.finished.error)) << failed.finished.error;
    }
    EXPECT_EQ(h.used(cache::Pool::kKvPage), CacheUnits(h.scheduler(), cache::Pool::kKvPage));
    EXPECT_EQ(h.used(cache::Pool::kSsmBlock), CacheUnits(h.scheduler(), cache::Pool::kSsmBlock));
    EXPECT_EQ(h.scheduler().stats().failed, 2u);
  }
}

}  // namespace
}  // namespace tandem::engine
