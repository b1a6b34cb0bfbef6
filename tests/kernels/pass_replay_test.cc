// The device-independent parts of replaying a pass from a CUDA graph: the deferred calls, the
// launch signatures that tell equal passes apart, and the cache that decides when to capture.
#include <array>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/deferred_calls.h"
#include "kernels/launch_signature.h"
#include "kernels/replay_cache.h"

namespace tandem::kernels {
namespace {

TEST(DeferredCallsTest, RunsTheCallsInOrderAndAgainUntilCleared) {
  DeferredCalls calls;
  std::vector<int> ran;
  for (int i = 0; i < 5; ++i) calls.Add([&ran, i] { ran.push_back(i); });
  EXPECT_EQ(calls.size(), 5u);
  EXPECT_TRUE(ran.empty());  // nothing runs when added
  calls.RunAll();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
  calls.RunAll();  // kept: a failed capture runs them again
  EXPECT_EQ(ran.size(), 10u);
  calls.Clear();
  EXPECT_TRUE(calls.empty());
  calls.RunAll();
  EXPECT_EQ(ran.size(), 10u);
}

TEST(DeferredCallsTest, GrowingTheArenaKeepsLargeCapturesIntact) {
  DeferredCalls calls;
  int64_t sum = 0;
  // Big captures (like the attention args) force the arena to grow several times.
  for (int i = 0; i < 300; ++i) {
    std::array<int64_t, 24> payload{};
    for (size_t k = 0; k < payload.size(); ++k) payload[k] = i * 100 + static_cast<int64_t>(k);
    calls.Add([&sum, payload] {
      for (int64_t v : payload) sum += v;
    });
  }
  calls.RunAll();
  int64_t expected = 0;
  for (int i = 0; i < 300; ++i) {
    for (int k = 0; k < 24; ++k) expected += i * 100 + k;
  }
  EXPECT_EQ(sum, expected);
}

TEST(DeferredCallsTest, AWarmListAllocatesNothingMore) {
  DeferredCalls calls;
  int n = 0;
  for (int i = 0; i < 100; ++i) calls.Add([&n] { ++n; });
  const size_t capacity = calls.capacity_bytes();
  calls.Clear();
  for (int i = 0; i < 100; ++i) calls.Add([&n] { ++n; });
  EXPECT_EQ(calls.capacity_bytes(), capacity);
}

SsdScanArgs SomeScan() {
  SsdScanArgs a;
  a.tokens = 1;
  a.heads = 8;
  a.head_dim = 64;
  a.groups = 1;
  a.state_size = 128;
  a.ld_x = 512;
  return a;
}

TEST(LaunchSignatureTest, EqualArgumentsGiveEqualSignaturesWhateverThePadding) {
  // Two structs equal field by field but with different bytes in their padding.
  alignas(SsdScanArgs) std::array<unsigned char, sizeof(SsdScanArgs)> a_bytes, b_bytes;
  a_bytes.fill(0x00);
  b_bytes.fill(0xff);
  auto* a = new (a_bytes.data()) SsdScanArgs(SomeScan());
  auto* b = new (b_bytes.data()) SsdScanArgs(SomeScan());
  LaunchSignature sa, sb;
  sa.Add(*a);
  sb.Add(*b);
  EXPECT_TRUE(sa == sb);
  EXPECT_EQ(sa.Hash(), sb.Hash());
}

TEST(LaunchSignatureTest, AnyFieldThatDiffersTellsTheLaunchesApart) {
  const SsdScanArgs base = SomeScan();
  LaunchSignature reference;
  reference.Add(base);
  std::vector<SsdScanArgs> variants(7, base);
  variants[0].tokens = 2;
  variants[1].dt_max = 1.0f;
  variants[2].state_offset = 16;
  variants[3].sequences.count = 3;
  float scratch[4];
  variants[4].y = scratch;
  const StateSnapshot snapshot{1, scratch};
  variants[5].snapshots = {&snapshot, 1};
  variants[6].ld_y = 7;
  for (const SsdScanArgs& v : variants) {
    LaunchSignature other;
    other.Add(v);
    EXPECT_FALSE(other == reference);
  }
  // The same values under another op are another launch.
  LaunchSignature named_a, named_b;
  named_a.Add(int{1});
  named_a.Add(base);
  named_b.Add(int{2});
  named_b.Add(base);
  EXPECT_FALSE(named_a == named_b);
}

std::vector<ReplayCache::Graph>* destroyed = nullptr;
void RecordDestroyed(ReplayCache::Graph g) { destroyed->push_back(g); }

LaunchSignature Signature(int64_t value) {
  LaunchSignature s;
  s.Add(value);
  return s;
}

ReplayCache::Graph FakeGraph(uintptr_t id) { return reinterpret_cast<ReplayCache::Graph>(id); }

class ReplayCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { destroyed = &destroyed_; }
  void TearDown() override { destroyed = nullptr; }
  std::vector<ReplayCache::Graph> destroyed_;
};

TEST_F(ReplayCacheTest, RunsEagerlyFirstCapturesSecondThenReplays) {
  ReplayCache cache(&RecordDestroyed);
  const LaunchSignature pass = Signature(7);
  EXPECT_EQ(cache.Decide(pass).plan, ReplayCache::Plan::kRunEagerly);
  EXPECT_EQ(cache.Decide(pass).plan, ReplayCache::Plan::kCapture);
  cache.Store(pass, FakeGraph(1));
  for (int i = 0; i < 3; ++i) {
    const ReplayCache::Decision d = cache.Decide(pass);
    EXPECT_EQ(d.plan, ReplayCache::Plan::kReplay);
    EXPECT_EQ(d.graph, FakeGraph(1));
  }
  EXPECT_EQ(cache.replays(), 3);
  EXPECT_EQ(cache.captures(), 1);
  // Another pass is not this one's graph.
  EXPECT_EQ(cache.Decide(Signature(8)).plan, ReplayCache::Plan::kRunEagerly);
}

TEST_F(ReplayCacheTest, ARefusedCaptureIsNotTriedAgain) {
  ReplayCache cache(&RecordDestroyed);
  const LaunchSignature pass = Signature(7);
  cache.Decide(pass);
  ASSERT_EQ(cache.Decide(pass).plan, ReplayCache::Plan::kCapture);
  cache.Refuse(pass);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.Decide(pass).plan, ReplayCache::Plan::kRunEagerly);
}

TEST_F(ReplayCacheTest, AGraphThatFailedIsDestroyedAndNotReplayed) {
  ReplayCache cache(&RecordDestroyed);
  const LaunchSignature pass = Signature(7);
  cache.Decide(pass);
  cache.Decide(pass);
  cache.Store(pass, FakeGraph(7));
  ASSERT_EQ(cache.Decide(pass).plan, ReplayCache::Plan::kReplay);
  cache.Refuse(pass);  // its launch failed
  EXPECT_EQ(destroyed_, (std::vector<ReplayCache::Graph>{FakeGraph(7)}));
  EXPECT_EQ(cache.graphs(), 0u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.Decide(pass).plan, ReplayCache::Plan::kRunEagerly);
}

TEST_F(ReplayCacheTest, KeepsTheMostRecentlyUsedGraphsAndDestroysTheRest) {
  ReplayCache cache(&RecordDestroyed, {.graphs = 2, .tracked = 8});
  for (int64_t s = 1; s <= 2; ++s) {
    cache.Decide(Signature(s));
    cache.Decide(Signature(s));
    cache.Store(Signature(s), FakeGraph(s));
  }
  EXPECT_EQ(cache.Decide(Signature(1)).plan, ReplayCache::Plan::kReplay);  // 2 is now the oldest
  cache.Decide(Signature(3));
  ASSERT_EQ(cache.Decide(Signature(3)).plan, ReplayCache::Plan::kCapture);
  cache.Store(Signature(3), FakeGraph(3));
  EXPECT_EQ(cache.graphs(), 2u);
  EXPECT_EQ(destroyed_, (std::vector<ReplayCache::Graph>{FakeGraph(2)}));
  EXPECT_EQ(cache.Decide(Signature(1)).graph, FakeGraph(1));
  EXPECT_EQ(cache.Decide(Signature(3)).graph, FakeGraph(3));
  // The evicted pass starts over: eager once more, then captured.
  EXPECT_EQ(cache.Decide(Signature(2)).plan, ReplayCache::Plan::kRunEagerly);
  EXPECT_EQ(cache.Decide(Signature(2)).plan, ReplayCache::Plan::kCapture);
}

TEST_F(ReplayCacheTest, ForgetsSignaturesWithoutGraphsButNotGraphs) {
  ReplayCache cache(&RecordDestroyed, {.graphs = 2, .tracked = 4});
  cache.Decide(Signature(100));
  cache.Decide(Signature(100));
  cache.Store(Signature(100), FakeGraph(100));
  for (int64_t s = 0; s < 50; ++s) cache.Decide(Signature(s));  // one-off passes
  EXPECT_EQ(cache.Decide(Signature(100)).plan, ReplayCache::Plan::kReplay);
  EXPECT_TRUE(destroyed_.empty());
}

TEST_F(ReplayCacheTest, ARefusedSignatureOutlivesTheForgettingOfOneOffPasses) {
  ReplayCache cache(&RecordDestroyed, {.graphs = 1, .tracked = 4});
  const LaunchSignature refused = Signature(100);
  cache.Decide(refused);
  ASSERT_EQ(cache.Decide(refused).plan, ReplayCache::Plan::kCapture);
  cache.Refuse(refused);
  for (int64_t s = 0; s < 50; ++s) cache.Decide(Signature(s));  // one-off passes, forgotten
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.Decide(refused).plan, ReplayCache::Plan::kRunEagerly);
  // Refused signatures alone filling the list are forgotten too: it stays bounded.
  for (int64_t s = 200; s < 210; ++s) {
    cache.Decide(Signature(s));
    cache.Decide(Signature(s));
    cache.Refuse(Signature(s));
  }
  EXPECT_EQ(cache.Decide(Signature(100)).plan, ReplayCache::Plan::kRunEagerly);
  EXPECT_EQ(cache.Decide(Signature(100)).plan, ReplayCache::Plan::kCapture);
}

TEST_F(ReplayCacheTest, RefusedSignaturesLeaveRoomForNewShapesToBeCaptured) {
  // Refused signatures filling all but one slot left two alternating shapes forgetting each
  // other, eager forever.
  ReplayCache cache(&RecordDestroyed, {.graphs = 1, .tracked = 8});
  for (int64_t s = 100; s < 107; ++s) {
    cache.Decide(Signature(s));
    cache.Decide(Signature(s));
    cache.Refuse(Signature(s));
  }
  int captures = 0;
  for (int step = 0; step < 20; ++step) {
    const LaunchSignature pass = Signature(step % 2);
    if (cache.Decide(pass).plan == ReplayCache::Plan::kCapture) {
      cache.Store(pass, FakeGraph(1 + step % 2));
      ++captures;
    }
  }
  EXPECT_GE(captures, 1);
}

TEST_F(ReplayCacheTest, ClearAndDestructionDestroyEveryGraph) {
  {
    ReplayCache cache(&RecordDestroyed);
    for (int64_t s = 1; s <= 3; ++s) {
      cache.Decide(Signature(s));
      cache.Decide(Signature(s));
      cache.Store(Signature(s), FakeGraph(s));
    }
    cache.Clear();
    EXPECT_EQ(destroyed_.size(), 3u);
    EXPECT_EQ(cache.Decide(Signature(1)).plan, ReplayCache::Plan::kRunEagerly);
    cache.Decide(Signature(1));
    cache.Store(Signature(1), FakeGraph(1));
  }
  EXPECT_EQ(destroyed_.size(), 4u);
}

TEST_F(ReplayCacheTest, AGraphForAForgottenSignatureIsDestroyedNotKept) {
  ReplayCache cache(&RecordDestroyed);
  cache.Store(Signature(5), FakeGraph(5));
  EXPECT_EQ(destroyed_, (std::vector<ReplayCache::Graph>{FakeGraph(5)}));
  EXPECT_EQ(cache.graphs(), 0u);
}

}  // namespace
}  // namespace tandem::kernels
