#include "cache/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "cache/arena_allocator.h"
#include "tests/cache/host_backing_for_tests.h"

namespace tandem::cache {
namespace {

constexpr size_t kPage = 16;

// One attention layer (32 B of KV per token) and one small Mamba-2 layer (224 B of state).
ModelSpec TinyHybrid() {
  ModelSpec s;
  s.name = "tiny-hybrid";
  s.attention = {
      .layers = 1, .input_width = 16, .output_width = 16, .heads = 1, .kv_heads = 1, .head_dim = 8};
  s.ssm = {.layers = 1,
           .kind = SsmKind::kMamba2,
           .hidden = 16,
           .d_inner = 8,
           .d_state = 4,
           .d_conv = 4,
           .heads = 2,
           .groups = 1,
           .chunk = 8};
  return s;
}
ModelSpec TinyAttention() {
  ModelSpec s = TinyHybrid();
  s.ssm.layers = 0;
  return s;
}
ModelSpec TinySsm() {
  ModelSpec s = TinyHybrid();
  s.attention.layers = 0;
  return s;
}

std::vector<TokenId> Range(TokenId from, TokenId to) {
  std::vector<TokenId> v(to - from);
  std::iota(v.begin(), v.end(), from);
  return v;
}
std::vector<TokenId> Cat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Plays the engine: allocates the sequence's own pages, writes each token's id into its KV
// slot (so block tables can be checked by content), saves states where asked, inserts.
class FakeEngine {
 public:
  // `memory`: where the pools live when not on the heap (the engine's device memory).
  explicit FakeEngine(ModelSpec spec, PrefixCacheConfig config = {}, size_t pages = 4096,
                      size_t blocks = 1024, const BackingFactory& memory = {})
      : spec_(std::move(spec)) {
    config.page_tokens = kPage;
    alloc_ = *ArenaAllocator::Create({.kv_page_bytes = spec_.kv_bytes_per_token() * kPage,
                                      .kv_pages = spec_.has_attention() ? pages : 0,
                                      .ssm_block_bytes = spec_.ssm_state_bytes(),
                                      .ssm_blocks = spec_.has_ssm() ? blocks : 0},
                                     memory);
    cache_ = std::make_unique<PrefixCache>(config, spec_, alloc_.get());
  }

  struct InFlight {
    PrefixCache::Hit hit;
    std::vector<TokenId> prompt;
    std::vector<Handle> own_pages;  // page indices floor(usable/P) ..
    std::vector<std::pair<size_t, Handle>> states;
  };

  // Lookup + prefill: the pages for [usable, prompt) and the requested states.
  InFlight Begin(const std::vector<TokenId>& prompt, const std::vector<size_t>& hints = {}) {
    InFlight f;
    f.prompt = prompt;
    f.hit = cache_->Lookup(prompt, SIZE_MAX, hints);
    if (spec_.has_ssm()) {
      for (size_t pos : f.hit.checkpoint_positions) f.states.push_back({pos, State(pos)});
    }
    Extend(f, prompt.size());
    return f;
  }

  // Decode `output`, save the final state, insert.
  absl::Status Finish(InFlight& f, const std::vector<TokenId>& output, bool final_state = true) {
    std::vector<TokenId> all = Cat(f.prompt, output);
    f.prompt = all;
    Extend(f, all.size());
    if (final_state && spec_.has_ssm()) f.states.push_back({all.size(), State(all.size())});
    PrefixCache::Completion done{
        .tokens = f.prompt, .kv_pages = f.own_pages, .checkpoints = f.states};
    f.own_pages.clear();
    f.states.clear();
    return cache_->Insert(f.hit.lease, std::move(done));
  }

  PrefixCache::Hit Serve(const std::vector<TokenId>& prompt,
                         const std::vector<TokenId>& output = {}) {
    InFlight f = Begin(prompt);
    EXPECT_TRUE(Finish(f, output).ok());
    return f.hit;
  }

  // Every usable position's KV slot holds its token.
  void ExpectBlockTable(const PrefixCache::Hit& hit, const std::vector<TokenId>& tokens) {
    if (!spec_.has_attention()) return;
    ASSERT_EQ(hit.kv_pages.size(), (hit.usable_tokens + kPage - 1) / kPage);
    for (size_t i = 0; i < hit.usable_tokens; ++i) {
      ASSERT_EQ(Slot(hit.kv_pages[i / kPage], i % kPage), tokens[i]) << "position " << i;
    }
  }

  PrefixCache& cache() { return *cache_; }
  BlockAllocator& alloc() { return *alloc_; }
  size_t used(Pool p) const { return alloc_->stats(p).used_units; }
  void Reset() { cache_.reset(); }

 private:
  Handle State(size_t pos) {
    Handle h = *alloc_->Allocate(Pool::kSsmBlock);
    std::memcpy(alloc_->Resolve(h), &pos, sizeof(pos));
    return h;
  }
  TokenId Slot(Handle page, size_t slot) {
    TokenId t;
    std::memcpy(&t, alloc_->Resolve(page) + slot * spec_.kv_bytes_per_token(), sizeof(t));
    return t;
  }
  void SetSlot(Handle page, size_t slot, TokenId t) {
    std::memcpy(alloc_->Resolve(page) + slot * spec_.kv_bytes_per_token(), &t, sizeof(t));
  }
  // Grows the sequence's own pages to cover `n` tokens and writes the new tokens' slots. The
  // first own page copies the tree's partially used page (copy-on-write).
  void Extend(InFlight& f, size_t n) {
    if (!spec_.has_attention()) return;
    const size_t first = f.hit.usable_tokens / kPage;
    const size_t have = first + f.own_pages.size();
    const size_t need = (n + kPage - 1) / kPage;
    for (size_t i = have; i < need; ++i) {
      Handle h = *alloc_->Allocate(Pool::kKvPage);
      if (i == first && f.hit.usable_tokens % kPage != 0) {
        std::memcpy(alloc_->Resolve(h), alloc_->Resolve(f.hit.kv_pages[first]),
                    alloc_->unit_bytes(Pool::kKvPage));
      }
      f.own_pages.push_back(h);
    }
    for (size_t i = f.hit.usable_tokens; i < n; ++i) {
      SetSlot(f.own_pages[i / kPage - first], i % kPage, f.prompt[i]);
    }
  }

  ModelSpec spec_;
  std::unique_ptr<ArenaAllocator> alloc_;
  std::unique_ptr<PrefixCache> cache_;
};

TEST(PrefixCacheTest, HybridMatchStopsAtTheDeepestCheckpoint) {
  FakeEngine e(TinyHybrid());
  const auto a = Range(1, 101);
  e.Serve(a);
  // The whole of `a` has a state at its end.
  auto h = e.cache().Lookup(Cat(a, {500, 501}));
  EXPECT_EQ(h.usable_tokens, 100u);
  EXPECT_EQ(h.cached_tokens, 100u);
  EXPECT_TRUE(h.checkpoint.valid());
  e.ExpectBlockTable(h, a);
  e.cache().Abort(h.lease);
  // A prompt that leaves `a` at 50 can reuse nothing: there is no state at 50.
  auto b = e.cache().Lookup(Cat(Range(1, 51), {999}));
  EXPECT_EQ(b.usable_tokens, 0u);
  EXPECT_EQ(b.cached_tokens, 50u);
  EXPECT_FALSE(b.checkpoint.valid());
  EXPECT_TRUE(b.kv_pages.empty());
  e.cache().Abort(b.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, SpeculativeInsertionCheckpointsTheBranchPoint) {
  FakeEngine e(TinyHybrid());
  const auto a = Range(1, 101);
  e.Serve(a);
  const auto b = Cat(Range(1, 51), Range(1000, 1040));
  auto f = e.Begin(b);
  ASSERT_EQ(f.hit.checkpoint_positions, std::vector<size_t>{50});
  ASSERT_TRUE(e.Finish(f, {7, 8, 9}).ok());
  // Branch point and last decoded token: two states, nothing else.
  EXPECT_EQ(e.cache().stats().checkpoints_admitted, 1u + 2u);
  // Now a third prompt sharing 50 tokens reuses them.
  auto c = e.cache().Lookup(Cat(Range(1, 51), {4242}));
  EXPECT_EQ(c.usable_tokens, 50u);
  e.ExpectBlockTable(c, a);
  e.cache().Abort(c.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, ABranchPointLeftWithoutAStateByConcurrentSequencesIsRepaired) {
  FakeEngine e(TinyHybrid());
  const auto shared = Range(1, 51);
  // Two sequences sharing 50 tokens run at once: neither sees the other at lookup, and the
  // second insertion splits the first's edge at 50 with no state there.
  auto a = e.Begin(Cat(shared, Range(1000, 1030)));
  auto b = e.Begin(Cat(shared, Range(2000, 2030)));
  EXPECT_TRUE(a.hit.checkpoint_positions.empty());
  EXPECT_TRUE(b.hit.checkpoint_positions.empty());
  ASSERT_TRUE(e.Finish(a, {7}).ok());
  ASSERT_TRUE(e.Finish(b, {8}).ok());
  // A third prompt through the bare branch point, leaving the tree inside a's edge: it is
  // asked for the state at 50 as well as at its own branch point.
  auto c = e.Begin(Cat(shared, Range(1000, 1010)));
  EXPECT_EQ(c.hit.usable_tokens, 0u);
  EXPECT_EQ(c.hit.checkpoint_positions, (std::vector<size_t>{50, 60}));
  ASSERT_TRUE(e.Finish(c, {9}).ok());
  // From then on the shared prefix is reused.
  auto d = e.cache().Lookup(Cat(shared, Range(3000, 3010)));
  EXPECT_EQ(d.usable_tokens, 50u);
  e.ExpectBlockTable(d, shared);
  e.cache().Abort(d.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

// Host memory whose copies are counted and can be made to fail, as a device's might.
class CopyCountingBacking final : public testing::HostBackingForTests {
 public:
  using HostBackingForTests::HostBackingForTests;
  absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) override {
    ++copies;
    if (fail) return absl::InternalError("copy failed");
    return HostBackingForTests::CopyBytes(dst, src, bytes);
  }
  int copies = 0;
  bool fail = false;
};

// Splitting an edge inside a page gives the upper half a copy of that page: the copy is the
// memory owner's to make (a GPU's pages cannot be memcpy'd), and when it fails the insertion is
// dropped like one without memory, leaking nothing.
TEST(PrefixCacheTest, ASplitCopiesItsPageThroughTheAllocatorsMemory) {
  for (const bool fail : {false, true}) {
    CopyCountingBacking* backing = nullptr;
    FakeEngine e(TinyHybrid(), {}, 64, 16, [&](size_t bytes) {
      auto made = std::make_unique<CopyCountingBacking>(bytes);
      backing = made.get();
      return absl::StatusOr<std::unique_ptr<MemoryBacking>>(std::move(made));
    });
    ASSERT_NE(backing, nullptr);
    const auto shared = Range(1, 51);  // 50 % 16 != 0: the split falls inside a page
    auto a = e.Begin(Cat(shared, Range(1000, 1030)));
    auto b = e.Begin(Cat(shared, Range(2000, 2030)));
    ASSERT_TRUE(e.Finish(a, {7}).ok());
    backing->fail = fail;
    ASSERT_TRUE(e.Finish(b, {8}).ok());
    EXPECT_EQ(backing->copies, 1) << fail;
    EXPECT_EQ(e.cache().stats().insert_failures, fail ? 1u : 0u);
    EXPECT_TRUE(e.cache().CheckInvariants().ok()) << fail;
    backing->fail = false;
    // What the tree holds is all that is allocated, and it still serves a's prefix.
    EXPECT_EQ(e.used(Pool::kKvPage), e.cache().stats().kv_pages) << fail;
    const auto a_again = Cat(Cat(shared, Range(1000, 1030)), {7, 99});
    auto hit = e.cache().Lookup(a_again);
    EXPECT_EQ(hit.usable_tokens, 81u) << fail;
    e.ExpectBlockTable(hit, a_again);
    e.cache().Abort(hit.lease);
  }
}

// Hints (message boundaries a caller knows later prompts will branch at) join the planned
// positions: sorted, without duplicates, only past the usable prefix and within the prompt,
// and not where the tree already has a state. Insert keeps them like the branch point.
TEST(PrefixCacheTest, HintedPositionsArePlannedAndAdmitted) {
  FakeEngine e(TinyHybrid());
  const auto a = Range(1, 101);
  e.Serve(a);                                           // a state at 100 only
  const auto b = Cat(Range(1, 51), Range(1000, 1040));  // leaves `a` at 50
  auto f = e.Begin(b, {20, 50, 70, 90, 91});            // 91 is past the prompt's 90 tokens
  EXPECT_EQ(f.hit.checkpoint_positions, (std::vector<size_t>{20, 50, 70, 90}));
  EXPECT_EQ(e.cache().stats().hinted_positions, 3u);  // 50 is the branch point anyway
  ASSERT_TRUE(e.Finish(f, {7}).ok());
  EXPECT_EQ(e.cache().stats().checkpoints, 1u + 5u);  // a's end; 20, 50, 70, 90 and b's end
  // A later prompt through 70 restores it; hints at or before the usable prefix, and at 100
  // where `a` has its state, are not asked for again.
  auto c = e.Begin(Cat(Range(1, 51), Range(1000, 1025)), {20, 70});
  EXPECT_EQ(c.hit.usable_tokens, 70u);
  EXPECT_EQ(c.hit.checkpoint_positions, std::vector<size_t>{75});  // its own branch point
  ASSERT_TRUE(e.Finish(c, {}).ok());
  auto d = e.Begin(Cat(a, {5}), {100});
  EXPECT_EQ(d.hit.usable_tokens, 100u);
  EXPECT_TRUE(d.hit.checkpoint_positions.empty());
  auto again = e.cache().Lookup(a, 99, {100});  // the state at 100 exists: not planned
  EXPECT_TRUE(again.checkpoint_positions.empty());
  e.cache().Abort(again.lease);
  ASSERT_TRUE(e.Finish(d, {}).ok());
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

// A copy into an allocator too small for the tree fails and keeps nothing of it.
TEST(PrefixCacheTest, CloneIntoAFullAllocatorFailsAndKeepsNothing) {
  FakeEngine e(TinyHybrid());
  for (TokenId s = 0; s < 6; ++s)
    e.Serve(Cat(Range(1, 41), Range(100 * (s + 1), 100 * (s + 1) + 30)));
  ASSERT_GT(e.cache().stats().kv_pages, 8u);
  auto small = *ArenaAllocator::Create({.kv_page_bytes = e.alloc().unit_bytes(Pool::kKvPage),
                                        .kv_pages = 8,
                                        .ssm_block_bytes = e.alloc().unit_bytes(Pool::kSsmBlock),
                                        .ssm_blocks = 64});
  auto copy = e.cache().Clone(small.get());
  EXPECT_TRUE(absl::IsResourceExhausted(copy.status())) << copy.status();
  EXPECT_EQ(small->stats(Pool::kKvPage).used_units, 0u);
  EXPECT_EQ(small->stats(Pool::kSsmBlock).used_units, 0u);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, AdmitsAtMostTwoStatesPerSequence) {
  FakeEngine e(TinyHybrid());
  e.Serve(Range(1, 101));
  auto f = e.Begin(Cat(Range(1, 41), Range(2000, 2100)));
  // The engine offers extra states; only the branch point (40) and the end are kept.
  for (size_t pos : {20u, 60u, 80u})
    f.states.push_back({pos, *e.alloc().Allocate(Pool::kSsmBlock)});
  const auto before = e.cache().stats();
  ASSERT_TRUE(e.Finish(f, {1, 2}).ok());
  const auto after = e.cache().stats();
  EXPECT_EQ(after.checkpoints_admitted - before.checkpoints_admitted, 2u);
  EXPECT_EQ(after.checkpoints_rejected - before.checkpoints_rejected, 3u);
  EXPECT_EQ(e.used(Pool::kSsmBlock), after.checkpoints);
}

TEST(PrefixCacheTest, EvictsOnlyNodesWithAtMostOneChild) {
  FakeEngine e(TinyHybrid());
  const auto trunk = Range(1, 65);
  e.Serve(Cat(trunk, Range(100, 140)));  // leaf A
  e.Serve(Cat(trunk, Range(200, 240)));  // branch at 64 + leaf B
  ASSERT_EQ(e.cache().stats().checkpoints, 3u);
  // Candidates are the two leaves; the branch node (two children) is not, although it is as
  // old as leaf A's state.
  e.cache().Evict(Pool::kSsmBlock, 1);
  EXPECT_EQ(e.cache().stats().leaf_evictions, 1u);
  auto h = e.cache().Lookup(Cat(trunk, {7}));
  EXPECT_EQ(h.usable_tokens, 64u);  // the branch node survived
  e.cache().Abort(h.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, EvictingASingleChildNodeMergesItsKvIntoTheChild) {
  FakeEngine e(TinyHybrid());
  const auto trunk = Range(1, 61);  // 60: the branch point is mid-page
  const auto a = Cat(trunk, Range(100, 140));
  const auto b = Cat(trunk, Range(200, 240));
  e.Serve(a);
  e.Serve(b);
  e.cache().Evict(Pool::kSsmBlock, 1);  // leaf A (oldest) goes
  // Refresh leaf B so that the branch node is now the oldest candidate.
  auto hb = e.cache().Lookup(b);
  e.ExpectBlockTable(hb, b);
  const std::vector<Handle> table = hb.kv_pages;
  e.cache().Abort(hb.lease);
  const auto before = e.cache().stats();
  e.cache().Evict(Pool::kSsmBlock, 1);
  const auto after = e.cache().stats();
  EXPECT_EQ(after.intermediate_evictions, 1u);
  EXPECT_EQ(after.checkpoints, before.checkpoints - 1);
  // The branch node's copy of the shared page 3 goes; every other page lives on in leaf B.
  EXPECT_EQ(after.kv_pages, before.kv_pages - 1);
  EXPECT_EQ(after.nodes, 1u);
  auto again = e.cache().Lookup(b);
  EXPECT_EQ(again.usable_tokens, b.size());
  EXPECT_EQ(again.kv_pages.size(), table.size());
  for (size_t i = 0; i < table.size(); ++i) EXPECT_EQ(again.kv_pages[i], table[i]) << i;
  e.ExpectBlockTable(again, b);
  e.cache().Abort(again.lease);
  auto gone = e.cache().Lookup(Cat(trunk, {1}));
  EXPECT_EQ(gone.usable_tokens, 0u);  // the state at 60 is gone
  e.cache().Abort(gone.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, AHitRefreshesOnlyTheAccessedNode) {
  FakeEngine e(TinyHybrid());
  const auto inner = Range(1, 33);
  const auto outer = Range(1, 65);
  e.Serve(inner);                              // node ending at 32 with a state
  e.Serve(outer);                              // its child ending at 64 with a state
  auto h = e.cache().Lookup(Cat(outer, {9}));  // hits the node at 64 only
  EXPECT_EQ(h.usable_tokens, 64u);
  e.cache().Abort(h.lease);
  // Under Marconi the node at 32 kept its old access time, so it is evicted first (its KV
  // merges into the child); under LRU-of-leaves it would not even be a candidate.
  e.cache().Evict(Pool::kSsmBlock, 1);
  EXPECT_EQ(e.cache().stats().intermediate_evictions, 1u);
  auto again = e.cache().Lookup(outer);
  EXPECT_EQ(again.usable_tokens, 64u);
  e.cache().Abort(again.lease);
}

TEST(PrefixCacheTest, FlopAwareEvictionWeighsEfficiencyByAlpha) {
  // A long sequence saves many FLOPs per byte of its state; a short one few. With α = 0 the
  // older (long) one goes; with a large α the newer, less efficient (short) one does.
  for (double alpha : {0.0, 2.0}) {
    PrefixCacheConfig c;
    c.alpha = alpha;
    FakeEngine e(TinyHybrid(), c);
    const auto long_seq = Range(1, 301);
    const auto short_seq = Range(5000, 5010);
    e.Serve(long_seq);
    e.Serve(short_seq);
    e.cache().Evict(Pool::kSsmBlock, 1);
    auto l = e.cache().Lookup(long_seq);
    auto s = e.cache().Lookup(short_seq);
    if (alpha == 0) {
      EXPECT_EQ(l.usable_tokens, 0u);
      EXPECT_EQ(s.usable_tokens, 10u);
    } else {
      EXPECT_EQ(l.usable_tokens, 300u);
      EXPECT_EQ(s.usable_tokens, 0u);
    }
    e.cache().Abort(l.lease);
    e.cache().Abort(s.lease);
  }
}

TEST(PrefixCacheTest, LruLeavesRefreshesThePathAndEvictsLeavesOnly) {
  PrefixCacheConfig c;
  c.eviction = EvictionPolicy::kLruLeaves;
  FakeEngine e(TinyHybrid(), c);
  e.Serve(Range(1, 33));
  e.Serve(Range(1, 65));
  e.cache().Evict(Pool::kSsmBlock, 1);
  EXPECT_EQ(e.cache().stats().leaf_evictions, 1u);
  EXPECT_EQ(e.cache().stats().intermediate_evictions, 0u);
  auto h = e.cache().Lookup(Range(1, 65));
  EXPECT_EQ(h.usable_tokens, 32u);
  e.cache().Abort(h.lease);
}

TEST(PrefixCacheTest, InFlightSequencesPinTheirNodes) {
  FakeEngine e(TinyHybrid());
  const auto a = Range(1, 101);
  e.Serve(a);
  auto f = e.Begin(Cat(a, {1, 2, 3}));
  ASSERT_EQ(f.hit.usable_tokens, 100u);
  e.cache().EvictToBytes(0);
  EXPECT_GT(e.cache().bytes(), 0u);
  e.ExpectBlockTable(f.hit, a);
  ASSERT_TRUE(e.Finish(f, {4}).ok());
  e.cache().EvictToBytes(0);
  EXPECT_EQ(e.cache().bytes(), 0u);
  EXPECT_EQ(e.used(Pool::kKvPage), 0u);
  EXPECT_EQ(e.used(Pool::kSsmBlock), 0u);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, AlphaIsZeroUntilTheFirstEviction) {
  PrefixCacheConfig c;
  c.capacity_bytes = 30 * 512;  // a few requests' worth
  FakeEngine e(TinyHybrid(), c);
  int fired = 0;
  e.cache().set_first_eviction_callback([&] {
    EXPECT_EQ(e.cache().alpha(), 0);
    ++fired;
  });
  for (int r = 0; r < 10; ++r) {
    EXPECT_EQ(e.cache().alpha(), 0);
    e.Serve(Range(1000 * r, 1000 * r + 100));
  }
  EXPECT_EQ(fired, 1);
  EXPECT_GT(e.cache().stats().evictions, 0u);
  EXPECT_LE(e.cache().bytes(), c.capacity_bytes);
}

TEST(PrefixCacheTest, PureAttentionReusesAnyPrefix) {
  FakeEngine e(TinyAttention());
  const auto a = Range(1, 101);
  e.Serve(a);
  auto f = e.Begin(Cat(Range(1, 38), {777, 778}));
  EXPECT_EQ(f.hit.usable_tokens, 37u);
  EXPECT_TRUE(f.hit.checkpoint_positions.empty());
  e.ExpectBlockTable(f.hit, a);
  ASSERT_TRUE(e.Finish(f, {1}).ok());
  auto g = e.cache().Lookup(Cat(Range(1, 38), {777, 778, 1}));
  EXPECT_EQ(g.usable_tokens, 40u);
  e.ExpectBlockTable(g, Cat(Range(1, 38), {777, 778, 1}));
  e.cache().Abort(g.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, PureSsmHoldsOnlyStates) {
  FakeEngine e(TinySsm());
  e.Serve(Range(1, 101));
  auto h = e.cache().Lookup(Range(1, 120));
  EXPECT_EQ(h.usable_tokens, 100u);
  EXPECT_TRUE(h.kv_pages.empty());
  e.cache().Abort(h.lease);
  EXPECT_EQ(e.cache().stats().kv_pages, 0u);
  EXPECT_EQ(e.cache().bytes(), TinySsm().ssm_state_bytes());
}

TEST(PrefixCacheTest, EveryBlockAdmissionCheckpointsEachBlock) {
  PrefixCacheConfig c;
  c.admission = AdmissionPolicy::kEveryBlock;
  c.eviction = EvictionPolicy::kLruLeaves;
  c.block_tokens = 32;
  FakeEngine e(TinyHybrid(), c);
  auto f = e.Begin(Range(1, 101));
  EXPECT_EQ(f.hit.checkpoint_positions, (std::vector<size_t>{32, 64, 96}));
  ASSERT_TRUE(e.Finish(f, {}).ok());
  EXPECT_EQ(e.cache().stats().checkpoints, 4u);  // 32, 64, 96 and 100
  auto h = e.cache().Lookup(Cat(Range(1, 80), {5}));
  EXPECT_EQ(h.usable_tokens, 64u);
  e.cache().Abort(h.lease);
}

TEST(PrefixCacheTest, APinnedPrefixSurvivesEvictionUntilUnpinned) {
  FakeEngine e(TinyHybrid());
  const auto system = Range(1, 101);
  e.Serve(system);
  absl::StatusOr<PrefixCache::PinId> pin = e.cache().PinPrefix(system);
  ASSERT_TRUE(pin.ok()) << pin.status();
  for (TokenId r = 0; r < 5; ++r) e.Serve(Cat(system, Range(1000 + 100 * r, 1050 + 100 * r)));
  e.Serve(Range(5000, 5100));
  const size_t path_bytes =
      7 * e.alloc().unit_bytes(Pool::kKvPage) + e.alloc().unit_bytes(Pool::kSsmBlock);
  EXPECT_EQ(e.cache().stats().pinned_bytes, path_bytes);  // pages 0..6 and the state at 100
  e.cache().EvictToBytes(0);
  EXPECT_EQ(e.cache().bytes(), path_bytes);
  EXPECT_EQ(e.cache().stats().pinned_prefixes, 1u);
  auto hit = e.cache().Lookup(Cat(system, {7, 8}));
  EXPECT_EQ(hit.usable_tokens, 100u);
  e.ExpectBlockTable(hit, system);
  e.cache().Abort(hit.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());

  ASSERT_TRUE(e.cache().UnpinPrefix(*pin).ok());
  EXPECT_EQ(e.cache().stats().pinned_prefixes, 0u);
  EXPECT_EQ(e.cache().stats().pinned_bytes, 0u);
  EXPECT_TRUE(absl::IsNotFound(e.cache().UnpinPrefix(*pin)));  // once only
  e.cache().EvictToBytes(0);
  EXPECT_EQ(e.cache().bytes(), 0u);
  EXPECT_EQ(e.used(Pool::kKvPage), 0u);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

// Prompts that share only part of a pinned prefix split its path where they branch. Those splits
// must not grow what the pin holds for good: no state is admitted inside the prefix (it could
// never be evicted), and once the branches are evicted the splits merge back.
TEST(PrefixCacheTest, BranchesInsideAPinnedPrefixLeaveNothingPinnedBehind) {
  FakeEngine e(TinyHybrid());
  const auto system = Range(1, 101);
  e.Serve(system);
  ASSERT_TRUE(e.cache().PinPrefix(system).ok());
  const PrefixCacheStats pinned = e.cache().stats();
  const size_t page = e.alloc().unit_bytes(Pool::kKvPage);
  const std::vector<size_t> branch_points = {21, 37, 60, 83};  // none on a page boundary
  // The second round branches at the same points again, each prompt running on past the
  // first round's.
  for (TokenId tail : {20, 25}) {
    for (size_t k : branch_points) {
      const auto branch = static_cast<TokenId>(900 + k);
      e.Serve(Cat(Range(1, static_cast<TokenId>(k + 1)), Range(branch, branch + tail)));
      // Each split copied one page into the pinned lower half; no state joined the path.
      EXPECT_LE(e.cache().stats().pinned_bytes, pinned.pinned_bytes + branch_points.size() * page);
      ASSERT_TRUE(e.cache().CheckInvariants().ok()) << e.cache().CheckInvariants();
    }
  }
  e.cache().EvictToBytes(0);
  const PrefixCacheStats after = e.cache().stats();
  EXPECT_EQ(after.pinned_bytes, pinned.pinned_bytes);
  EXPECT_EQ(after.bytes, pinned.pinned_bytes);
  EXPECT_EQ(after.nodes, pinned.nodes);  // the splits merged back
  EXPECT_TRUE(e.cache().CheckInvariants().ok()) << e.cache().CheckInvariants();
  // The prefix is still whole.
  auto hit = e.cache().Lookup(Cat(system, {7}));
  EXPECT_EQ(hit.usable_tokens, 100u);
  e.ExpectBlockTable(hit, system);
  e.cache().Abort(hit.lease);
}

TEST(PrefixCacheTest, PinningNeedsTheWholePrefixAndAStateAtItsEnd) {
  FakeEngine e(TinyHybrid());
  const auto a = Range(1, 101);
  e.Serve(a);
  const PrefixCacheStats before = e.cache().stats();
  EXPECT_TRUE(absl::IsInvalidArgument(e.cache().PinPrefix({}).status()));
  // Not in the tree, or only partly.
  EXPECT_TRUE(absl::IsFailedPrecondition(e.cache().PinPrefix(Range(500, 510)).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(e.cache().PinPrefix(Range(1, 120)).status()));
  // Inside the edge: no state there, and no split to make one.
  EXPECT_TRUE(absl::IsFailedPrecondition(e.cache().PinPrefix(Range(1, 51)).status()));
  EXPECT_EQ(e.cache().stats().nodes, before.nodes);
  EXPECT_EQ(e.cache().stats().pinned_prefixes, 0u);
  EXPECT_TRUE(absl::IsNotFound(e.cache().UnpinPrefix(12345)));
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, PureAttentionPinsAnyCachedPrefixAndSharedPathsCountOnce) {
  FakeEngine e(TinyAttention());
  const auto a = Range(1, 101);
  e.Serve(a);
  absl::StatusOr<PrefixCache::PinId> inner = e.cache().PinPrefix(Range(1, 38));  // splits
  ASSERT_TRUE(inner.ok()) << inner.status();
  absl::StatusOr<PrefixCache::PinId> whole = e.cache().PinPrefix(a);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const size_t page = e.alloc().unit_bytes(Pool::kKvPage);
  // Pages 0..2 on the upper edge, 2..6 on the lower one (page 2 copied by the split).
  EXPECT_EQ(e.cache().stats().pinned_bytes, 8 * page);
  e.cache().EvictToBytes(0);
  EXPECT_EQ(e.cache().bytes(), 8 * page);
  ASSERT_TRUE(e.cache().UnpinPrefix(*whole).ok());
  e.cache().EvictToBytes(0);
  EXPECT_EQ(e.cache().stats().pinned_bytes, 3 * page);
  auto hit = e.cache().Lookup(Cat(Range(1, 38), {500}));
  EXPECT_EQ(hit.usable_tokens, 37u);
  e.ExpectBlockTable(hit, a);
  e.cache().Abort(hit.lease);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

TEST(PrefixCacheTest, BadInsertIsRejectedAndFreesItsHandles) {
  FakeEngine e(TinyHybrid());
  e.Serve(Range(1, 101));
  auto f = e.Begin(Cat(Range(1, 101), {5}));
  f.own_pages.push_back(*e.alloc().Allocate(Pool::kKvPage));  // one page too many
  EXPECT_EQ(e.Finish(f, {6}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.cache().Insert(12345, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.used(Pool::kKvPage), e.cache().stats().kv_pages);
  EXPECT_EQ(e.used(Pool::kSsmBlock), e.cache().stats().checkpoints);
  EXPECT_TRUE(e.cache().CheckInvariants().ok());
}

// Long random operation sequences: invariants hold after every step, pinned prefixes keep
// their content, byte accounting is exact and every handle comes back exactly once.
struct PropertyResult {
  PrefixCacheStats stats;
  size_t steps = 0;
  int pins_made = 0;
};

PropertyResult RunProperty(ModelSpec spec, EvictionPolicy policy, AdmissionPolicy admission,
                           uint64_t seed, int steps) {
  PropertyResult out;
  PrefixCacheConfig c;
  c.eviction = policy;
  c.admission = admission;
  c.alpha = seed % 2 == 0 ? 0.0 : 1.0;
  c.capacity_bytes = 60 * spec.kv_bytes_per_token() * kPage + 6 * spec.ssm_state_bytes();
  FakeEngine e(spec, c, 1 << 16, 1 << 12);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<TokenId>> history = {{}};
  std::vector<FakeEngine::InFlight> flying;
  std::vector<std::pair<PrefixCache::PinId, std::vector<TokenId>>> pins;
  for (int step = 0; step < steps; ++step) {
    const int op = rng() % 11;
    if (op == 10) {
      // Pin a prefix of an earlier sequence (refused where the tree holds no state at its end),
      // or unpin one.
      if (pins.size() < 2) {
        const auto& base = history[rng() % history.size()];
        if (base.empty()) continue;
        // A whole earlier sequence ends where its last state was kept (unless evicted since).
        const size_t length = rng() % 2 == 0 ? base.size() : 1 + rng() % base.size();
        std::vector<TokenId> prefix(base.begin(), base.begin() + length);
        absl::StatusOr<PrefixCache::PinId> pin = e.cache().PinPrefix(prefix);
        if (pin.ok()) {
          ++out.pins_made;
          pins.push_back({*pin, prefix});
        } else {
          EXPECT_TRUE(absl::IsFailedPrecondition(pin.status())) << pin.status();
        }
      } else {
        const size_t i = rng() % pins.size();
        EXPECT_TRUE(e.cache().UnpinPrefix(pins[i].first).ok());
        pins.erase(pins.begin() + i);
      }
    } else if (op < 4 && flying.size() < 6) {
      // A prompt that shares a random prefix with an earlier sequence.
      const auto& base = history[rng() % history.size()];
      const size_t keep = base.empty() ? 0 : rng() % (base.size() + 1);
      std::vector<TokenId> prompt(base.begin(), base.begin() + keep);
      const size_t extra = 1 + rng() % 40;
      for (size_t i = 0; i < extra; ++i) prompt.push_back(static_cast<TokenId>(rng() % 4));
      flying.push_back(e.Begin(prompt));
    } else if (op < 8 && !flying.empty()) {
      const size_t i = rng() % flying.size();
      std::vector<TokenId> output(rng() % 20);
      for (auto& t : output) t = static_cast<TokenId>(rng() % 4);
      if (rng() % 4 == 0 && spec.has_ssm()) {
        flying[i].states.push_back(
            {1 + rng() % flying[i].prompt.size(), *e.alloc().Allocate(Pool::kSsmBlock)});
      }
      EXPECT_TRUE(e.Finish(flying[i], output, rng() % 8 != 0).ok());
      history.push_back(flying[i].prompt);
      if (history.size() > 50) history.erase(history.begin());
      flying.erase(flying.begin() + i);
    } else if (op == 8 && !flying.empty()) {
      const size_t i = rng() % flying.size();
      e.cache().Abort(flying[i].hit.lease);
      for (Handle h : flying[i].own_pages) e.alloc().Free(h);
      for (auto& [pos, h] : flying[i].states) e.alloc().Free(h);
      flying.erase(flying.begin() + i);
    } else {
      e.cache().Evict(rng() % 2 ? Pool::kKvPage : Pool::kSsmBlock, 1 + rng() % 3);
    }
    if (step % 3 == 0) e.cache().set_alpha(double(rng() % 5) / 2);
    const absl::Status victim = e.cache().CheckVictimChoice();
    EXPECT_TRUE(victim.ok()) << "step " << step << ": " << victim;
    const absl::Status inv = e.cache().CheckInvariants();
    EXPECT_TRUE(inv.ok()) << "step " << step << ": " << inv;
    if (!inv.ok()) return out;
    // Every pinned prefix is restored whole (no test token is 99, so the match ends there).
    for (const auto& [pin, prefix] : pins) {
      PrefixCache::Hit hit = e.cache().Lookup(Cat(prefix, {99}));
      EXPECT_EQ(hit.usable_tokens, prefix.size()) << "step " << step << ", pin " << pin;
      e.ExpectBlockTable(hit, prefix);
      e.cache().Abort(hit.lease);
    }
    // In-flight sequences' restored prefixes are intact.
    size_t engine_pages = 0, engine_states = 0;
    for (const auto& f : flying) {
      e.ExpectBlockTable(f.hit, f.prompt);
      engine_pages += f.own_pages.size();
      engine_states += f.states.size();
    }
    const PrefixCacheStats s = e.cache().stats();
    EXPECT_EQ(e.used(Pool::kKvPage), s.kv_pages + engine_pages);
    EXPECT_EQ(e.used(Pool::kSsmBlock), s.checkpoints + engine_states);
    EXPECT_EQ(s.bytes, s.kv_pages * e.alloc().unit_bytes(Pool::kKvPage) +
                           s.checkpoints * e.alloc().unit_bytes(Pool::kSsmBlock));
    EXPECT_EQ(s.pinned_prefixes, pins.size());
    EXPECT_LE(s.pinned_bytes, s.bytes);
    if (flying.empty()) {
      // What is over capacity is pinned: an unpinned node left would have an evictable leaf
      // below it, since a pinned node's ancestors are pinned.
      EXPECT_LE(s.bytes, std::max(c.capacity_bytes, s.pinned_bytes));
    }
    if (::testing::Test::HasFailure()) return out;
  }
  for (auto& f : flying) {
    e.cache().Abort(f.hit.lease);
    for (Handle h : f.own_pages) e.alloc().Free(h);
    for (auto& [pos, h] : f.states) e.alloc().Free(h);
  }
  out.stats = e.cache().stats();
  out.steps = steps;
  e.Reset();
  EXPECT_EQ(e.used(Pool::kKvPage), 0u);
  EXPECT_EQ(e.used(Pool::kSsmBlock), 0u);
  return out;
}

class PrefixCachePropertyTest
    : public ::testing::TestWithParam<std::tuple<int, EvictionPolicy, AdmissionPolicy>> {};

TEST_P(PrefixCachePropertyTest, RandomOperations) {
  const auto [model, policy, admission] = GetParam();
  const ModelSpec spec = model == 0 ? TinyHybrid() : model == 1 ? TinyAttention() : TinySsm();
  PrefixCacheStats total;
  int pins_made = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    PropertyResult r = RunProperty(spec, policy, admission, seed, 3000);
    if (HasFailure()) return;
    total.evictions += r.stats.evictions;
    total.intermediate_evictions += r.stats.intermediate_evictions;
    total.hit_tokens += r.stats.hit_tokens;
    total.checkpoints_rejected += r.stats.checkpoints_rejected;
    pins_made += r.pins_made;
  }
  EXPECT_GT(pins_made, 5);
  // The sequences exercise every path: evictions, hits and rejected offers.
  EXPECT_GT(total.evictions, 100u);
  EXPECT_GT(total.hit_tokens, 0u);
  if (spec.has_ssm()) {
    EXPECT_GT(total.checkpoints_rejected, 0u);
  }
  if (spec.has_ssm() && policy == EvictionPolicy::kFlopAware) {
    EXPECT_GT(total.intermediate_evictions, 0u);
  }
  std::printf("evictions %llu intermediate %llu hit_tokens %llu pins %d\n",
              (unsigned long long)total.evictions, (unsigned long long)total.intermediate_evictions,
              (unsigned long long)total.hit_tokens, pins_made);
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, PrefixCachePropertyTest,
    ::testing::Values(
        std::make_tuple(0, EvictionPolicy::kFlopAware, AdmissionPolicy::kBranchAndLast),
        std::make_tuple(0, EvictionPolicy::kLruLeaves, AdmissionPolicy::kBranchAndLast),
        std::make_tuple(0, EvictionPolicy::kLruLeaves, AdmissionPolicy::kEveryBlock),
        std::make_tuple(1, EvictionPolicy::kFlopAware, AdmissionPolicy::kBranchAndLast),
        std::make_tuple(2, EvictionPolicy::kFlopAware, AdmissionPolicy::kBranchAndLast)));

TEST(PrefixCacheTest, SameSeedSameNumbers) {
  auto a = RunProperty(TinyHybrid(), EvictionPolicy::kFlopAware, AdmissionPolicy::kBranchAndLast, 9,
                       2000);
  auto b = RunProperty(TinyHybrid(), EvictionPolicy::kFlopAware, AdmissionPolicy::kBranchAndLast, 9,
                       2000);
  EXPECT_EQ(a.stats.hit_tokens, b.stats.hit_tokens);
  EXPECT_EQ(a.stats.evictions, b.stats.evictions);
  EXPECT_EQ(a.stats.bytes, b.stats.bytes);
  EXPECT_EQ(a.stats.checkpoints_admitted, b.stats.checkpoints_admitted);
}

}  // namespace
}  // namespace tandem::cache
