// Asymmetric Virtual Memory Paging (AVMP): KV pages and SSM blocks in two pools carved from one
// reserved address range, trading capacity at run time.
//
// The range is cut into equal granules (the larger unit's stride rounded up to 4 KiB). Every
// granule belongs to at most one pool and is split into that pool's units; a handle's index is
// granule × units_per_granule + slot, so the granule table is the page table. When an Allocate
// finds its pool full and the other pool's free fraction exceeds threshold_high, fully free
// granules of the donor (highest first) are decommitted and handed to the recipient: nothing is
// copied and nothing beyond the budget is reserved (the prototype reserved 2×). Allocation takes
// the lowest free index, which keeps live units packed at the low granules so high granules
// drain and can move. Migrations are throttled by a count of Allocate/Free calls, not by time,
// so a replay is deterministic.
//
// Beyond the paper, demand-aware migration (AvmpConfig::demand_aware, on by default). The
// paper's trigger looks only at free fractions, so when admissions exhaust the SSM pool while
// the KV pool is momentarily 30% free it moves KV capacity to SSM, more sequences are admitted,
// and the KV they will need while decoding is no longer there (with a 152 MB Zamba2 state one
// granule is one sequence or 25 KV pages, so a single move over-commits the KV pool). The
// admission path therefore tells the allocator each pool's reserved demand: the units that
// admitted sequences will still allocate (SetReservedDemand). Then
//  1. look-ahead: a migration under the paper's trigger is taken only while the donor, net of
//     its reserved demand, keeps a free fraction above threshold_high *after* the move, counting
//     the demand the moved capacity will attract at the live ratio of donor to recipient demand
//     ((used + reserved) of each pool). With no reserved demand this reduces to "the paper's
//     test, evaluated after the move at the current usage ratio";
//  2. pull: a pool whose free units do not cover its reserved demand may take the donor's fully
//     free granules that the donor has not promised, even below threshold_high: enough to cover
//     the shortfall plus the demand the donor's remaining spare units would attract;
//  3. deferred pull: when such a pull finds no free donor granule (every SSM block is held by a
//     running sequence), it is retried at the donor's next Allocate, before that allocation is
//     served, instead of letting the donor hand its freed granule to a new admission.
// A migration never takes units the donor has promised. The throttle, batch size, threshold
// and 1.0× reservation are the paper's and apply to every migration.
#ifndef TANDEM_CACHE_AVMP_ALLOCATOR_H_
#define TANDEM_CACHE_AVMP_ALLOCATOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "cache/block_allocator.h"
#include "cache/memory_backing.h"

namespace tandem::cache {

struct AvmpConfig {
  size_t kv_page_bytes = 0;    // 0 for a model without attention
  size_t ssm_block_bytes = 0;  // 0 for a model without SSM layers
  size_t budget_bytes = 0;     // reserved exactly once (rounded down to whole granules)
  // The SSM pool's initial share of granules.
  double initial_ssm_fraction = 0.5;
  // false = a static split (avmp-static): capacity never moves.
  bool dynamic = true;
  // A full pool may take capacity only from a donor whose free fraction exceeds this (a
  // demand-aware pull, rule 2, is the one exception).
  double threshold_high = 0.30;
  // Units of the pool that ran out that one migration tries to add. A migration under the
  // threshold rule moves at most half of the donor's fully free granules (and at least one), so
  // one pool's burst cannot drain the other; a pull is bounded by the shortfall instead.
  size_t migration_batch_size = 128;
  // Allocate/Free calls that must pass between two migrations (the paper's
  // min_rebalance_interval_ops).
  uint64_t min_rebalance_interval_ops = 1000;
  // 0 = the larger stride rounded up to 4 KiB and to the backing's granularity.
  size_t granule_bytes = 0;
  BackingKind backing = BackingKind::kHost;
  // Beyond the paper: the demand-aware rules above. false = the paper's rules exactly (reserved
  // demand is then ignored).
  bool demand_aware = true;
};

class AvmpAllocator final : public BlockAllocator {
 public:
  // INVALID_ARGUMENT for inconsistent sizes; RESOURCE_EXHAUSTED if the range cannot be
  // reserved. `backing`, when given, replaces the one config.backing names (it must reserve at
  // least the budget's whole granules): another device's memory, or a test's.
  static absl::StatusOr<std::unique_ptr<AvmpAllocator>> Create(
      const AvmpConfig& config, std::unique_ptr<MemoryBacking> backing = nullptr);

  absl::StatusOr<Handle> Allocate(Pool pool) override;
  // No deferred pull, no migration, no OOM count, and no tick of the migration throttle.
  absl::StatusOr<Handle> AllocateIfFree(Pool pool) override;
  void Free(Handle handle) override;
  std::byte* Resolve(Handle handle) const override;
  // Through the backing, whose memory may be a GPU's.
  absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) override {
    return backing_->CopyBytes(dst, src, bytes);
  }
  absl::Status ZeroBytes(std::byte* dst, size_t bytes) override {
    return backing_->ZeroBytes(dst, bytes);
  }
  size_t unit_bytes(Pool pool) const override;
  PoolStats stats(Pool pool) const override;
  AllocatorStats allocator_stats() const override;

  // Beyond the paper: the units of `pool` that admitted sequences will still allocate (for KV,
  // the pages of the tokens running requests have yet to decode), kept current by whoever
  // admits sequences. It is a hint for migration only: allocations are never refused because
  // of it. Default 0.
  void SetReservedDemand(Pool pool, size_t units) { reserved_[int(pool)] = units; }
  size_t reserved_demand(Pool pool) const { return reserved_[int(pool)]; }
  // Migrations that only the demand-aware pull allowed (a subset of migrations).
  uint64_t demand_pulls() const { return pulls_; }

  size_t granule_bytes() const { return granule_bytes_; }
  size_t num_granules() const { return owner_.size(); }
  // Granules currently owned by `pool`.
  size_t granules(Pool pool) const { return pools_[int(pool)].granules.size(); }

 private:
  static constexpr uint8_t kNoPool = 0xff;
  // The lowest free unit of `pool`, which has one (`partial` is not empty), committing its
  // granule's memory if needed.
  absl::StatusOr<Handle> TakeFreeUnit(Pool pool);
  struct PoolState {
    size_t unit_bytes = 0;
    size_t stride = 0;
    size_t units_per_granule = 0;
    std::set<uint32_t> granules;  // owned granules
    std::set<uint32_t> partial;   // owned granules with a free unit, lowest first
    std::vector<uint8_t> live;    // by unit index over all granules
    size_t used = 0;
    size_t drained = 0;  // owned granules with no live unit
    uint64_t oom_events = 0;
  };

  AvmpAllocator() = default;
  // Moves capacity to `recipient` if the rules allow; true if any granule moved. `deferred`:
  // a retried pull (rule 3), not an allocation failure.
  bool TryMigrate(Pool recipient, bool deferred);
  // Units `pool` has promised (reserved demand) beyond its free units.
  size_t Shortfall(Pool pool) const;
  // Granules of `donor` whose move to `recipient` the demand-aware rules allow.
  size_t DemandAwareMove(Pool recipient, bool paper_rule, size_t wanted, size_t drained) const;
  void AddGranule(Pool pool, uint32_t granule);
  void RemoveGranule(Pool pool, uint32_t granule);
  size_t capacity_units(Pool pool) const {
    const PoolState& p = pools_[int(pool)];
    return p.granules.size() * p.units_per_granule;
  }

  AvmpConfig config_;
  size_t granule_bytes_ = 0;
  std::unique_ptr<MemoryBacking> backing_;
  std::vector<uint8_t> owner_;          // pool of each granule, or kNoPool
  std::vector<uint32_t> granule_live_;  // live units in each granule
  std::vector<uint8_t> committed_;      // granule touched since its last decommit
  std::array<PoolState, kNumPools> pools_;
  size_t reserved_[kNumPools] = {0, 0};
  uint64_t ops_ = 0;
  uint64_t pulls_ = 0;
  bool pull_pending_[kNumPools] = {false, false};
  uint64_t last_migration_op_ = 0;
  bool migrated_once_ = false;
  AllocatorStats totals_;
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_AVMP_ALLOCATOR_H_
