#include "cache/alpha_tuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cache/counting_allocator.h"
#include "cache/request_runner.h"
#include "cache/workloads.h"

namespace tandem::cache {
namespace {

struct Rig {
  explicit Rig(size_t capacity_bytes, TunerConfig tc) : spec(*ModelSpec::Builtin("marconi-7b")) {
    alloc =
        std::make_unique<CountingAllocator>(16 * spec.kv_bytes_per_token(), spec.ssm_state_bytes());
    PrefixCacheConfig c;
    c.capacity_bytes = capacity_bytes;
    cache = std::make_unique<PrefixCache>(c, spec, alloc.get());
    tuner = std::make_unique<AlphaTuner>(tc, cache.get());
  }
  void Serve(const std::vector<TokenId>& in, const std::vector<TokenId>& out) {
    auto r = RunRequest(*cache, *alloc, in, out);
    tuner->OnRequest(in, out, r.ok() ? r->usable_tokens : 0);
  }
  ModelSpec spec;
  std::unique_ptr<CountingAllocator> alloc;
  std::unique_ptr<PrefixCache> cache;
  std::unique_ptr<AlphaTuner> tuner;
};

void ServeTrace(Rig& rig, const Trace& t, size_t limit = SIZE_MAX) {
  std::vector<TokenId> in, out;
  for (size_t i = 0; i < t.size() && i < limit; ++i) {
    t.Tokens(i, &in, &out);
    if (rig.cache->stats().evictions == 0) {
      EXPECT_EQ(rig.cache->alpha(), 0) << "α must stay 0 before the first eviction";
    }
    rig.Serve(in, out);
  }
}

TEST(AlphaTunerTest, TunesOnceOnTheBootstrapWindow) {
  TunerConfig tc;
  tc.synchronous = true;
  tc.drift_window = 0;
  Rig rig(size_t{2} * 1000 * 1000 * 1000, tc);
  WorkloadOptions o;
  o.sessions = 30;
  ServeTrace(rig, *GenerateSessionWorkload("lmsys", o));
  ASSERT_EQ(rig.tuner->events().size(), 1u);
  const AlphaTuning& e = rig.tuner->events()[0];
  EXPECT_EQ(e.reason, "first eviction");
  EXPECT_GT(e.window, 0u);
  EXPECT_EQ(rig.cache->alpha(), e.alpha);
  EXPECT_GE(e.alpha, 0);
  EXPECT_LE(e.alpha, 2);
}

TEST(AlphaTunerTest, BootstrapWindowHasAMinimumSize) {
  // A 1 GB cache holds about nine 101.9 MB states: the first eviction comes within a few
  // requests, so k × the requests seen is a tiny window.
  WorkloadOptions o;
  o.sessions = 30;
  const Trace t = *GenerateSessionWorkload("lmsys", o);
  for (size_t min_window : {size_t{0}, size_t{100}}) {
    TunerConfig tc;
    tc.synchronous = true;
    tc.drift_window = 0;
    tc.min_window_requests = min_window;
    Rig rig(size_t{1000} * 1000 * 1000, tc);
    ServeTrace(rig, t);
    ASSERT_EQ(rig.tuner->events().size(), 1u);
    const AlphaTuning& e = rig.tuner->events()[0];
    // The window starts the request after the first eviction.
    const size_t seen_before = e.at_request - e.window - 1;
    const size_t k_window = static_cast<size_t>(std::ceil(tc.bootstrap_multiplier * seen_before));
    ASSERT_LT(k_window, 100u) << "the first eviction should come early at 1 GB";
    EXPECT_EQ(e.window, std::max(k_window, min_window)) << "min_window=" << min_window;
  }
}

TEST(AlphaTunerTest, AsynchronousTuningMatchesSynchronous) {
  WorkloadOptions o;
  o.sessions = 30;
  const Trace t = *GenerateSessionWorkload("sharegpt", o);
  TunerConfig sync;
  sync.synchronous = true;
  sync.drift_window = 0;
  Rig a(size_t{2} * 1000 * 1000 * 1000, sync);
  ServeTrace(a, t);
  TunerConfig async = sync;
  async.synchronous = false;
  Rig b(size_t{2} * 1000 * 1000 * 1000, async);
  // Serve exactly up to the window, then wait for the replay before going on.
  std::vector<TokenId> in, out;
  for (size_t i = 0; i < t.size(); ++i) {
    t.Tokens(i, &in, &out);
    b.Serve(in, out);
    b.tuner->Wait();
  }
  ASSERT_EQ(a.tuner->events().size(), 1u);
  ASSERT_EQ(b.tuner->events().size(), 1u);
  EXPECT_EQ(a.tuner->events()[0].alpha, b.tuner->events()[0].alpha);
  EXPECT_DOUBLE_EQ(a.tuner->events()[0].flops_saved, b.tuner->events()[0].flops_saved);
}

TEST(AlphaTunerTest, RetunesWhenTheHitRateDrifts) {
  TunerConfig tc;
  tc.synchronous = true;
  tc.drift_window = 50;
  tc.drift_threshold = 0.1;
  Rig rig(size_t{3} * 1000 * 1000 * 1000, tc);
  WorkloadOptions o;
  o.sessions = 40;
  ServeTrace(rig, *GenerateSessionWorkload("lmsys", o));
  ASSERT_GE(rig.tuner->events().size(), 1u);
  // Then traffic changes: single-turn prompts that share nothing, so the hit rate collapses.
  std::mt19937 rng(3);
  for (int r = 0; r < 600; ++r) {
    std::vector<TokenId> in(300), out(20);
    for (auto& t : in) t = static_cast<TokenId>(rng() & 0x3fffffff);
    rig.Serve(in, out);
  }
  ASSERT_GE(rig.tuner->events().size(), 2u);
  EXPECT_EQ(rig.tuner->events().back().reason, "hit rate drift");
}

// The prompts and outputs of `sessions` generated lmsys sessions, as a tuner logs them.
struct Log {
  std::vector<std::vector<TokenId>> prompts, outputs;
};
Log SessionLog(size_t sessions) {
  WorkloadOptions o;
  o.sessions = sessions;
  const Trace t = *GenerateSessionWorkload("lmsys", o);
  Log log;
  std::vector<TokenId> in, out;
  for (size_t i = 0; i < t.size(); ++i) {
    t.Tokens(i, &in, &out);
    log.prompts.push_back(in);
    log.outputs.push_back(out);
  }
  return log;
}

TEST(AlphaTunerTest, ReplayGridIsDeterministic) {
  Rig rig(size_t{1} * 1000 * 1000 * 1000, {});
  const Log log = SessionLog(10);
  const auto& prompts = log.prompts;
  const auto& outputs = log.outputs;
  const std::vector<double> grid = {0, 0.5, 1, 2};
  auto a = AlphaTuner::ReplayGrid(*rig.cache, prompts, outputs, grid, 1);
  auto b = AlphaTuner::ReplayGrid(*rig.cache, prompts, outputs, grid, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
  EXPECT_GT((*a)[0], 0);
}

// An engine's tree has no capacity of its own (the allocator bounds it). Its replays must still
// be bounded, or they never evict and every α scores the same; and the logged window must stay
// within its bounds however long the server ran before its first eviction.
TEST(AlphaTunerTest, WindowAndReplaysAreBoundedForATreeWithoutCapacity) {
  TunerConfig tc;
  tc.synchronous = true;
  tc.drift_window = 0;
  tc.bootstrap_multiplier = 1000;  // k × requests far beyond the bounds below
  tc.max_window_requests = 40;
  tc.max_window_tokens = size_t{1} << 30;
  const ModelSpec spec = *ModelSpec::Builtin("marconi-7b");
  // The allocator (not the tree) runs out, as in the engine: room for a few states.
  CountingAllocator counting(16 * spec.kv_bytes_per_token(), spec.ssm_state_bytes());
  PrefixCacheConfig c;  // capacity_bytes 0, as the engine configures it
  PrefixCache cache(c, spec, &counting);
  AlphaTuner tuner(tc, &cache);
  WorkloadOptions o;
  o.sessions = 30;
  const Trace t = *GenerateSessionWorkload("lmsys", o);
  std::vector<TokenId> in, out;
  for (size_t i = 0; i < t.size(); ++i) {
    t.Tokens(i, &in, &out);
    auto r = RunRequest(cache, counting, in, out);
    ASSERT_TRUE(r.ok()) << r.status();
    tuner.OnRequest(in, out, r->usable_tokens);
    EXPECT_LE(tuner.logged_tokens(), tc.max_window_tokens);
    // Stand in for the allocator running dry: the engine evicts when an allocation fails.
    if (cache.bytes() > size_t{3} * 1000 * 1000 * 1000)
      cache.EvictToBytes(size_t{2} * 1000 * 1000 * 1000);
  }
  ASSERT_GE(tuner.tunings(), 1u);
  const AlphaTuning& e = tuner.events().front();
  EXPECT_TRUE(e.error.empty()) << e.error;
  EXPECT_EQ(e.window, tc.max_window_requests);
}

// A replay bounded by capacity_bytes evicts, so it saves less than an unbounded one over
// traffic that outgrows the bound.
TEST(AlphaTunerTest, ReplayCapacityBoundsTheCopies) {
  Rig rig(0, {});  // a tree without capacity, like the engine's
  const Log log = SessionLog(20);
  const auto& prompts = log.prompts;
  const auto& outputs = log.outputs;
  auto unbounded = AlphaTuner::ReplayGrid(*rig.cache, prompts, outputs, {0.0}, 1);
  auto bounded =
      AlphaTuner::ReplayGrid(*rig.cache, prompts, outputs, {0.0}, 1, size_t{1000} * 1000 * 1000);
  ASSERT_TRUE(unbounded.ok()) << unbounded.status();
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_LT((*bounded)[0], (*unbounded)[0]);
}

TEST(AlphaTunerTest, KeepsOnlyTheLatestEventsButCountsAll) {
  TunerConfig tc;
  tc.synchronous = true;
  tc.drift_window = 20;
  tc.drift_threshold = 0.01;
  tc.min_window_requests = 5;
  tc.max_events = 2;
  Rig rig(size_t{1} * 1000 * 1000 * 1000, tc);
  std::mt19937 rng(5);
  // Alternate shared and unshared traffic so the hit rate keeps drifting.
  for (int block = 0; block < 12; ++block) {
    for (int r = 0; r < 40; ++r) {
      std::vector<TokenId> in(200), out(10);
      for (size_t k = 0; k < in.size(); ++k) {
        in[k] = block % 2 == 0 && k < 150 ? static_cast<TokenId>(k)
                                          : static_cast<TokenId>(rng() & 0xffffff);
      }
      rig.Serve(in, out);
    }
  }
  EXPECT_GT(rig.tuner->tunings(), 2u);
  EXPECT_EQ(rig.tuner->events().size(), 2u);
}

}  // namespace
}  // namespace tandem::cache
