#include "cache/avmp_allocator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "cache/allocator_factory.h"
#include "cache/baseline_allocators.h"
#include "tests/cache/host_backing_for_tests.h"

namespace tandem::cache {
namespace {

// 4 KiB granules: one SSM block (4 KiB) or four KV pages (1 KiB) each.
AvmpConfig SmallConfig() {
  return {.kv_page_bytes = 1024,
          .ssm_block_bytes = 4096,
          .budget_bytes = 16 * 4096,
          .initial_ssm_fraction = 0.5,
          .dynamic = true,
          .threshold_high = 0.30,
          .migration_batch_size = 4,
          .min_rebalance_interval_ops = 0};
}

TEST(AvmpAllocatorTest, ReservesExactlyTheBudget) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  AllocatorStats s = a->allocator_stats();
  EXPECT_EQ(a->granule_bytes(), 4096u);
  EXPECT_EQ(s.reserved_bytes, 16u * 4096);
  EXPECT_EQ(s.peak_reserved_bytes, s.budget_bytes);
  EXPECT_EQ(a->stats(Pool::kKvPage).capacity_units, 32u);
  EXPECT_EQ(a->stats(Pool::kSsmBlock).capacity_units, 8u);
}

TEST(AvmpAllocatorTest, HandlesResolveToDistinctWritableMemory) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  std::vector<Handle> hs;
  for (int i = 0; i < 8; ++i) hs.push_back(*a->Allocate(Pool::kKvPage));
  for (int i = 0; i < 3; ++i) hs.push_back(*a->Allocate(Pool::kSsmBlock));
  std::set<std::byte*> seen;
  for (Handle h : hs) {
    std::byte* p = a->Resolve(h);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    std::memset(p, 0x5a, a->unit_bytes(h.pool()));
    EXPECT_TRUE(seen.insert(p).second);
  }
  for (Handle h : hs) a->Free(h);
  EXPECT_EQ(a->stats(Pool::kKvPage).used_units, 0u);
}

TEST(AvmpAllocatorTest, MigratesCapacityUnderPressure) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  std::vector<Handle> ssm;
  for (int i = 0; i < 8; ++i) ssm.push_back(*a->Allocate(Pool::kSsmBlock));
  // The SSM pool is full; the KV pool is entirely free, so capacity moves.
  auto h = a->Allocate(Pool::kSsmBlock);
  ASSERT_TRUE(h.ok()) << h.status();
  AllocatorStats s = a->allocator_stats();
  EXPECT_EQ(s.migrations, 1u);
  // batch 4 SSM blocks = 4 granules, within half of the 8 free KV granules.
  EXPECT_EQ(s.bytes_migrated, 4u * 4096);
  EXPECT_EQ(a->stats(Pool::kSsmBlock).capacity_units, 12u);
  EXPECT_EQ(a->stats(Pool::kKvPage).capacity_units, 16u);
  EXPECT_EQ(s.pools[1].oom_events, 0u);
  EXPECT_EQ(s.reserved_bytes, 16u * 4096);  // still 1.0× the budget
  // The moved memory is usable by its new owner.
  std::memset(a->Resolve(*h), 1, 4096);
}

// An optional allocation (speculative decoding's borrowed blocks) takes a free unit or nothing:
// where Allocate would move capacity over, it refuses without a migration or an OOM event.
TEST(AvmpAllocatorTest, AllocateIfFreeNeverMigratesOrCountsAnOom) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  std::vector<Handle> ssm;
  for (int i = 0; i < 7; ++i) ssm.push_back(*a->Allocate(Pool::kSsmBlock));
  auto last = a->AllocateIfFree(Pool::kSsmBlock);  // the eighth, free
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(absl::IsResourceExhausted(a->AllocateIfFree(Pool::kSsmBlock).status()));
  AllocatorStats s = a->allocator_stats();
  EXPECT_EQ(s.migrations, 0u);
  EXPECT_EQ(s.pools[1].oom_events, 0u);
  EXPECT_EQ(a->stats(Pool::kSsmBlock).capacity_units, 8u);
  // Allocate itself still moves capacity when it must.
  EXPECT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_EQ(a->allocator_stats().migrations, 1u);
}

TEST(AvmpAllocatorTest, AllocateIfFreeOfAFixedSplit) {
  auto fixed = *FixedDualAllocator::Create(
      {.kv_page_bytes = 1024, .ssm_block_bytes = 4096, .budget_bytes = 16 * 4096});
  const size_t blocks = fixed->stats(Pool::kSsmBlock).capacity_units;
  for (size_t i = 0; i < blocks; ++i) ASSERT_TRUE(fixed->AllocateIfFree(Pool::kSsmBlock).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(fixed->AllocateIfFree(Pool::kSsmBlock).status()));
  EXPECT_EQ(fixed->stats(Pool::kSsmBlock).oom_events, 0u);
}

TEST(AvmpAllocatorTest, MigratedGranulesAreDecommitted) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  std::vector<Handle> kv;
  for (int i = 0; i < 32; ++i) {
    kv.push_back(*a->Allocate(Pool::kKvPage));
    std::memset(a->Resolve(kv.back()), 0xff, 1024);
  }
  const size_t committed = a->allocator_stats().committed_bytes;
  EXPECT_EQ(committed, 8u * 4096);
  for (Handle h : kv) a->Free(h);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  Handle moved = *a->Allocate(Pool::kSsmBlock);  // migration: KV granules become SSM blocks
  ASSERT_EQ(a->allocator_stats().migrations, 1u);
  // The granule was returned to the OS (MADV_DONTNEED) before the SSM pool got it: it reads
  // as zeros, not as the KV pages' old bytes.
  const std::byte* p = a->Resolve(moved);
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(p[i], std::byte{0}) << i;
}

// Host memory whose commits and decommits can be made to fail, as a device backing's might.
class FlakyBacking final : public testing::HostBackingForTests {
 public:
  using HostBackingForTests::HostBackingForTests;
  absl::Status Commit(size_t offset, size_t bytes) override {
    if (fail_commits > 0) {
      --fail_commits;
      return absl::ResourceExhaustedError("no device memory");
    }
    return HostBackingForTests::Commit(offset, bytes);
  }
  absl::Status Decommit(size_t offset, size_t bytes) override {
    if (fail_decommits) return absl::InternalError("unmap failed");
    return HostBackingForTests::Decommit(offset, bytes);
  }
  int fail_commits = 0;
  bool fail_decommits = false;
};

// A backing that maps in pieces of 2 MiB, as GPU memory does: AVMP's granules must be whole
// multiples of that, or a decommit would return memory its neighbours still use.
TEST(AvmpAllocatorTest, GranulesMustBeWholePiecesOfTheBacking) {
  class CoarseBacking final : public testing::HostBackingForTests {
   public:
    using HostBackingForTests::HostBackingForTests;
    size_t granularity() const override { return size_t{2} << 20; }
  };
  AvmpConfig c;
  c.kv_page_bytes = 64 << 10;
  c.ssm_block_bytes = 256 << 10;
  c.budget_bytes = 8 << 20;
  c.granule_bytes = 1 << 20;
  auto refused = AvmpAllocator::Create(c, std::make_unique<CoarseBacking>(c.budget_bytes));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.status().message()).find("granularity 2097152"), std::string::npos)
      << refused.status();
  c.granule_bytes = 2 << 20;
  EXPECT_TRUE(AvmpAllocator::Create(c, std::make_unique<CoarseBacking>(c.budget_bytes)).ok());
}

// A commit the backing refuses fails that allocation alone, leaving the pool as it was; a
// refused decommit leaves the memory mapped and counted, and the migration still happens.
TEST(AvmpAllocatorTest, BackingFailuresAreReportedNotIgnored) {
  auto flaky = std::make_unique<FlakyBacking>(16 * 4096);
  FlakyBacking* backing = flaky.get();
  auto a = *AvmpAllocator::Create(SmallConfig(), std::move(flaky));
  backing->fail_commits = 1;
  auto refused = a->Allocate(Pool::kKvPage);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  AllocatorStats s = a->allocator_stats();
  EXPECT_EQ(s.commit_failures, 1u);
  EXPECT_EQ(s.pools[0].used_units, 0u);
  EXPECT_EQ(s.committed_bytes, 0u);
  std::vector<Handle> kv;
  for (int i = 0; i < 32; ++i) kv.push_back(*a->Allocate(Pool::kKvPage));  // all of KV, committed
  EXPECT_EQ(a->allocator_stats().committed_bytes, 8u * 4096);
  for (Handle h : kv) a->Free(h);
  backing->fail_decommits = true;
  std::vector<Handle> ssm;
  for (int i = 0; i < 9; ++i) ssm.push_back(*a->Allocate(Pool::kSsmBlock));  // the 9th migrates
  s = a->allocator_stats();
  EXPECT_EQ(s.migrations, 1u);
  EXPECT_EQ(s.decommit_failures, 4u);              // the four granules moved, still mapped
  EXPECT_EQ(s.committed_bytes, (8u + 8u) * 4096);  // KV's eight (four now SSM's) + SSM's eight
  std::memset(a->Resolve(ssm.back()), 1, 4096);    // and usable by their new owner
  for (Handle h : ssm) a->Free(h);
}

// A backing smaller than the budget is refused.
TEST(AvmpAllocatorTest, RefusesABackingSmallerThanTheBudget) {
  auto made = AvmpAllocator::Create(SmallConfig(), std::make_unique<FlakyBacking>(4096));
  EXPECT_TRUE(absl::IsInvalidArgument(made.status())) << made.status();
}

TEST(AvmpAllocatorTest, RefusesWhenNeitherPoolHasSlack) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  std::vector<Handle> kv, ssm;
  for (int i = 0; i < 8; ++i) ssm.push_back(*a->Allocate(Pool::kSsmBlock));
  // Use 80% of the KV pool (free fraction 0.2 < 0.3): no donor.
  for (int i = 0; i < 26; ++i) kv.push_back(*a->Allocate(Pool::kKvPage));
  auto h = a->Allocate(Pool::kSsmBlock);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kResourceExhausted);
  AllocatorStats s = a->allocator_stats();
  EXPECT_EQ(s.migrations, 0u);
  EXPECT_EQ(s.pools[1].oom_events, 1u);
  EXPECT_EQ(a->stats(Pool::kSsmBlock).capacity_units, 8u);
}

TEST(AvmpAllocatorTest, LiveUnitsPinTheirGranules) {
  // The KV pool is 40% used, so it has slack, but one live page in every granule means no
  // granule can move without copying: the migration is aborted.
  auto a = *AvmpAllocator::Create(SmallConfig());
  std::vector<Handle> kv;
  for (int i = 0; i < 32; ++i) kv.push_back(*a->Allocate(Pool::kKvPage));
  for (int i = 0; i < 32; ++i) {
    if (i % 4 != 0 && i % 4 != 1) a->Free(kv[i]);
  }
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_FALSE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_EQ(a->allocator_stats().migrations_aborted, 1u);
}

TEST(AvmpAllocatorTest, StaticSplitNeverMigrates) {
  AvmpConfig c = SmallConfig();
  c.dynamic = false;
  auto a = *AvmpAllocator::Create(c);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_FALSE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_EQ(a->allocator_stats().migrations, 0u);
}

TEST(AvmpAllocatorTest, MigrationIsThrottledByOperationCount) {
  AvmpConfig c = SmallConfig();
  c.min_rebalance_interval_ops = 100;
  c.migration_batch_size = 1;
  auto a = *AvmpAllocator::Create(c);
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());  // 1 migration
  EXPECT_EQ(a->allocator_stats().migrations, 1u);
  EXPECT_FALSE(a->Allocate(Pool::kSsmBlock).ok());                    // too soon
  for (int i = 0; i < 50; ++i) a->Free(*a->Allocate(Pool::kKvPage));  // 100 operations
  EXPECT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_EQ(a->allocator_stats().migrations, 2u);
}

// The demand-aware rules (beyond the paper). SmallConfig: 16 granules, 8 KV (32 pages) and 8 SSM.

TEST(AvmpDemandAwareTest, ReservedDemandKeepsCapacityFromMovingToNewAdmissions) {
  for (bool aware : {true, false}) {
    AvmpConfig c = SmallConfig();
    c.demand_aware = aware;
    auto a = *AvmpAllocator::Create(c);
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
    // The KV pool is entirely free, but running sequences will still need 24 of its 32 pages.
    a->SetReservedDemand(Pool::kKvPage, 24);
    auto h = a->Allocate(Pool::kSsmBlock);
    EXPECT_EQ(h.ok(), !aware) << "aware=" << aware;
    EXPECT_EQ(a->allocator_stats().migrations, aware ? 0u : 1u);
    EXPECT_EQ(a->stats(Pool::kKvPage).capacity_units, aware ? 32u : 16u);
  }
}

TEST(AvmpDemandAwareTest, LookAheadCountsTheDemandTheMovedCapacityBrings) {
  // 16 KV pages are used by 8 sequences (two pages per SSM block). The paper's rule moves half
  // of the 4 drained KV granules (2), which would leave 8 pages for 10 sequences; the
  // look-ahead keeps the KV pool above threshold_high after the move at the live ratio and
  // moves one.
  for (bool aware : {true, false}) {
    AvmpConfig c = SmallConfig();
    c.demand_aware = aware;
    auto a = *AvmpAllocator::Create(c);
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(a->Allocate(Pool::kKvPage).ok());
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
    ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
    EXPECT_EQ(a->granules(Pool::kSsmBlock), aware ? 9u : 10u) << "aware=" << aware;
  }
}

TEST(AvmpDemandAwareTest, PullCoversAShortfallBelowThreshold) {
  for (bool aware : {true, false}) {
    AvmpConfig c = SmallConfig();
    c.demand_aware = aware;
    auto a = *AvmpAllocator::Create(c);
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
    for (int i = 0; i < 32; ++i) ASSERT_TRUE(a->Allocate(Pool::kKvPage).ok());
    // The SSM pool is 25% free (below threshold_high), so the paper refuses; but the KV pool
    // has promised 3 more pages it does not have, and 2 SSM granules are promised to no one.
    a->SetReservedDemand(Pool::kKvPage, 3);
    auto h = a->Allocate(Pool::kKvPage);
    EXPECT_EQ(h.ok(), aware) << "aware=" << aware;
    EXPECT_EQ(a->demand_pulls(), aware ? 1u : 0u);
    EXPECT_EQ(a->stats(Pool::kKvPage).capacity_units, aware ? 36u : 32u);
    EXPECT_EQ(a->allocator_stats().reserved_bytes, 16u * 4096);  // still 1.0× the budget
  }
}

TEST(AvmpDemandAwareTest, PullNeverTakesWhatTheDonorPromised) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(a->Allocate(Pool::kKvPage).ok());
  a->SetReservedDemand(Pool::kKvPage, 3);
  a->SetReservedDemand(Pool::kSsmBlock, 2);  // both free SSM blocks are spoken for
  EXPECT_FALSE(a->Allocate(Pool::kKvPage).ok());
  EXPECT_EQ(a->allocator_stats().migrations, 0u);
  EXPECT_EQ(a->stats(Pool::kSsmBlock).capacity_units, 8u);
}

TEST(AvmpDemandAwareTest, DeferredPullTakesTheDonorsNextFreedGranule) {
  AvmpConfig c = SmallConfig();
  c.migration_batch_size = 1;
  auto a = *AvmpAllocator::Create(c);
  std::vector<Handle> ssm;
  for (int i = 0; i < 8; ++i) ssm.push_back(*a->Allocate(Pool::kSsmBlock));
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(a->Allocate(Pool::kKvPage).ok());
  a->SetReservedDemand(Pool::kKvPage, 2);
  // Every SSM block is held: the KV pool's pull finds no granule to take.
  EXPECT_FALSE(a->Allocate(Pool::kKvPage).ok());
  EXPECT_EQ(a->allocator_stats().migrations, 0u);
  // A sequence finishes; before its block is handed to a new admission, the KV pool gets it.
  a->Free(ssm.back());
  EXPECT_FALSE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_EQ(a->demand_pulls(), 1u);
  EXPECT_EQ(a->stats(Pool::kKvPage).capacity_units, 36u);
  EXPECT_EQ(a->stats(Pool::kSsmBlock).capacity_units, 7u);
  EXPECT_TRUE(a->Allocate(Pool::kKvPage).ok());
  // Once the shortfall is covered the SSM pool is left alone.
  a->SetReservedDemand(Pool::kKvPage, 0);
  a->Free(ssm[0]);
  EXPECT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_EQ(a->allocator_stats().migrations, 1u);
}

TEST(AvmpDemandAwareTest, PullsAreThrottledLikeEveryMigration) {
  AvmpConfig c = SmallConfig();
  c.min_rebalance_interval_ops = 1000;
  c.migration_batch_size = 1;
  auto a = *AvmpAllocator::Create(c);
  std::vector<Handle> ssm;
  for (int i = 0; i < 6; ++i) ssm.push_back(*a->Allocate(Pool::kSsmBlock));
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(a->Allocate(Pool::kKvPage).ok());
  a->SetReservedDemand(Pool::kKvPage, 10);
  ASSERT_TRUE(a->Allocate(Pool::kKvPage).ok());  // first migration: not throttled
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->Allocate(Pool::kKvPage).ok());
  EXPECT_FALSE(a->Allocate(Pool::kKvPage).ok());  // still short, but too soon
  EXPECT_EQ(a->allocator_stats().migrations, 1u);
}

TEST(AvmpAllocatorDeathTest, DoubleFreeIsCaught) {
  auto a = *AvmpAllocator::Create(SmallConfig());
  Handle h = *a->Allocate(Pool::kKvPage);
  a->Free(h);
  EXPECT_DEATH(a->Free(h), "double free");
}

TEST(AvmpAllocatorTest, RandomOperationsAreDeterministicAndConsistent) {
  // With demand hints too, so the pull and deferred-pull paths run under the same invariants.
  for (bool hints : {false, true}) {
    SCOPED_TRACE(hints ? "with reserved demand" : "without reserved demand");
    auto run = [hints](uint64_t seed) -> std::vector<uint64_t> {
      AvmpConfig c = SmallConfig();
      c.budget_bytes = 64 * 4096;
      c.backing = BackingKind::kAccounting;
      c.min_rebalance_interval_ops = 7;
      auto a = *AvmpAllocator::Create(c);
      std::mt19937_64 rng(seed);
      std::vector<Handle> live[2];
      std::set<uint32_t> raw;
      for (int step = 0; step < 20000; ++step) {
        if (hints && step % 50 == 0) {
          a->SetReservedDemand(Pool::kKvPage, rng() % 48);
          a->SetReservedDemand(Pool::kSsmBlock, rng() % 6);
        }
        const int p = rng() % 3 == 0 ? 1 : 0;
        if (rng() % 2 == 0 || live[p].empty()) {
          auto h = a->Allocate(Pool(p));
          if (h.ok()) {
            EXPECT_TRUE(raw.insert(h->raw()).second) << "handle given out twice";
            live[p].push_back(*h);
          }
        } else {
          size_t i = rng() % live[p].size();
          raw.erase(live[p][i].raw());
          a->Free(live[p][i]);
          live[p][i] = live[p].back();
          live[p].pop_back();
        }
        for (int q = 0; q < 2; ++q) {
          PoolStats s = a->stats(Pool(q));
          EXPECT_EQ(s.used_units, live[q].size());
          EXPECT_LE(s.used_units, s.capacity_units);
        }
        EXPECT_EQ(a->granules(Pool::kKvPage) + a->granules(Pool::kSsmBlock), a->num_granules());
        if (::testing::Test::HasFailure()) return {};
      }
      AllocatorStats s = a->allocator_stats();
      return std::vector<uint64_t>{
          s.migrations,          s.bytes_migrated,          s.pools[0].oom_events,
          s.pools[1].oom_events, s.pools[0].capacity_units, a->demand_pulls()};
    };
    auto first = run(7);
    EXPECT_EQ(first, run(7));
    EXPECT_GT(first[0], 0u);
    if (hints) {
      EXPECT_GT(first[5], 0u) << "no pull ever ran";
    }
  }
}

TEST(BaselineAllocatorTest, FixedDualUsesSglangsRatio) {
  auto a = *FixedDualAllocator::Create({.kv_page_bytes = 1024,
                                        .ssm_block_bytes = 4096,
                                        .budget_bytes = 190 * 4096,
                                        .mamba_full_memory_ratio = 0.9,
                                        .backing = BackingKind::kAccounting});
  // SSM share = 0.9 / 1.9 ≈ 47%, not 90%.
  EXPECT_EQ(a->stats(Pool::kSsmBlock).capacity_units, 90u);
  EXPECT_EQ(a->stats(Pool::kKvPage).capacity_units, 400u);
  for (int i = 0; i < 90; ++i) ASSERT_TRUE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_FALSE(a->Allocate(Pool::kSsmBlock).ok());
  EXPECT_EQ(a->stats(Pool::kSsmBlock).oom_events, 1u);
}

TEST(BaselineAllocatorTest, PaddedUnifiedPadsEverySlotToTheStateSize) {
  auto a = *PaddedUnifiedAllocator::Create({.kv_page_bytes = 1000,
                                            .ssm_block_bytes = 4000,
                                            .budget_bytes = 10 * 4032,
                                            .backing = BackingKind::kHost});
  EXPECT_EQ(a->kv_pages_per_slot(), 4u);
  EXPECT_EQ(a->slot_bytes(), 4032u);
  EXPECT_EQ(a->unit_bytes(Pool::kKvPage), 4000u);
  std::vector<Handle> hs;
  for (int i = 0; i < 6; ++i) hs.push_back(*a->Allocate(Pool::kKvPage));
  for (int i = 0; i < 4; ++i) hs.push_back(*a->Allocate(Pool::kSsmBlock));
  EXPECT_FALSE(a->Allocate(Pool::kKvPage).ok());
  for (Handle h : hs) std::memset(a->Resolve(h), 3, a->unit_bytes(h.pool()));
  for (Handle h : hs) a->Free(h);
  EXPECT_EQ(a->stats(Pool::kKvPage).used_units + a->stats(Pool::kSsmBlock).used_units, 0u);
}

TEST(AllocatorFactoryTest, ParsesNames) {
  ModelSpec spec = *ModelSpec::Builtin("jamba-1.5-mini");
  AllocatorOptions o{.budget_bytes = size_t{1} << 30};
  for (const char* name : {"padded-unified", "fixed-dual:0.9", "avmp-static:0.5", "avmp-dynamic",
                           "avmp-dynamic:0.9", "avmp-dynamic-paper", "avmp-dynamic-paper:0.5"}) {
    auto a = CreateAllocator(name, spec, o);
    ASSERT_TRUE(a.ok()) << name << ": " << a.status();
    EXPECT_LE(a->allocator->allocator_stats().reserved_bytes, o.budget_bytes) << name;
  }
  EXPECT_EQ(CreateAllocator("fixed-dual:x", spec, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateAllocator("buddy", spec, o).status().code(), absl::StatusCode::kInvalidArgument);
  auto padded = *CreateAllocator("padded-unified", spec, o);
  // 16 MB of state / 256 KiB pages: 62 pages per slot.
  EXPECT_EQ(padded.kv_page_tokens, 16u * 62);
}

}  // namespace
}  // namespace tandem::cache
