#include "cache/avmp_allocator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "cache/check.h"

namespace tandem::cache {
namespace {
constexpr size_t kAlign = 64;
constexpr size_t kGranuleAlign = 4096;
size_t RoundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }
}  // namespace

absl::StatusOr<std::unique_ptr<AvmpAllocator>> AvmpAllocator::Create(
    const AvmpConfig& config, std::unique_ptr<MemoryBacking> given_backing) {
  if (config.kv_page_bytes == 0 && config.ssm_block_bytes == 0) {
    return absl::InvalidArgumentError("avmp: both unit sizes are 0");
  }
  if (!(config.initial_ssm_fraction >= 0 && config.initial_ssm_fraction <= 1)) {
    return absl::InvalidArgumentError("avmp: initial_ssm_fraction must be in [0, 1]");
  }
  if (!(config.threshold_high >= 0 && config.threshold_high < 1)) {
    return absl::InvalidArgumentError("avmp: threshold_high must be in [0, 1)");
  }
  if (config.dynamic && config.migration_batch_size == 0) {
    return absl::InvalidArgumentError("avmp: migration_batch_size must be positive");
  }
  std::unique_ptr<AvmpAllocator> a(new AvmpAllocator());
  a->config_ = config;
  const size_t units[kNumPools] = {config.kv_page_bytes, config.ssm_block_bytes};
  size_t largest = 0;
  for (int p = 0; p < kNumPools; ++p) {
    a->pools_[p].unit_bytes = units[p];
    a->pools_[p].stride = RoundUp(units[p], kAlign);
    largest = std::max(largest, a->pools_[p].stride);
  }
  // By default a granule is the larger unit rounded up to what the backing maps at once (host
  // pages; 2 MiB on a GPU).
  size_t default_align = kGranuleAlign;
  if (given_backing != nullptr && given_backing->granularity() % kGranuleAlign == 0) {
    default_align = std::max(default_align, given_backing->granularity());
  }
  size_t g = config.granule_bytes == 0 ? RoundUp(largest, default_align) : config.granule_bytes;
  if (g < largest || g % kGranuleAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat("avmp: granule_bytes ", g,
                                                   " must be a multiple of 4096 and hold one ",
                                                   largest, "-byte unit"));
  }
  a->granule_bytes_ = g;
  const size_t n = config.budget_bytes / g;
  if (n > (size_t{1} << 26)) {
    return absl::InvalidArgumentError(absl::StrCat("avmp: a budget of ", config.budget_bytes,
                                                   " bytes is too many (", n, ") granules of ", g));
  }
  for (int p = 0; p < kNumPools; ++p) {
    PoolState& ps = a->pools_[p];
    ps.units_per_granule = ps.stride == 0 ? 0 : g / ps.stride;
    if (ps.units_per_granule > 0 && n > 0x7fffffffu / ps.units_per_granule) {
      return absl::InvalidArgumentError(
          absl::StrCat("avmp: pool ", PoolName(Pool(p)), " would exceed the 31-bit handle space"));
    }
    ps.live.assign(n * ps.units_per_granule, 0);
  }
  if (given_backing != nullptr) {
    if (given_backing->reserved_bytes() < n * g) {
      return absl::InvalidArgumentError(absl::StrCat("avmp: the backing reserves ",
                                                     given_backing->reserved_bytes(),
                                                     " bytes, fewer than ", n * g));
    }
    a->backing_ = std::move(given_backing);
  } else {
    auto backing = CreateBacking(config.backing, n * g);
    if (!backing.ok()) return backing.status();
    a->backing_ = *std::move(backing);
  }
  // Granules are committed and decommitted whole, so each must cover whole pieces of what the
  // backing maps (host pages; 2 MiB on a GPU).
  if (a->backing_->granularity() > 0 && g % a->backing_->granularity() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "avmp: granule_bytes ", g, " is not a multiple of the memory backing's granularity ",
        a->backing_->granularity()));
  }
  a->owner_.assign(n, kNoPool);
  a->granule_live_.assign(n, 0);
  a->committed_.assign(n, 0);

  // Initial split; a pool whose unit size is 0 gets nothing.
  size_t ssm = static_cast<size_t>(std::llround(config.initial_ssm_fraction * double(n)));
  if (a->pools_[int(Pool::kSsmBlock)].units_per_granule == 0) ssm = 0;
  if (a->pools_[int(Pool::kKvPage)].units_per_granule == 0) ssm = n;
  for (size_t i = 0; i < n; ++i) {
    a->AddGranule(i < n - ssm ? Pool::kKvPage : Pool::kSsmBlock, static_cast<uint32_t>(i));
  }
  a->totals_.budget_bytes = config.budget_bytes;
  a->totals_.reserved_bytes = a->totals_.peak_reserved_bytes = n * g;
  return a;
}

void AvmpAllocator::AddGranule(Pool pool, uint32_t granule) {
  PoolState& p = pools_[int(pool)];
  owner_[granule] = static_cast<uint8_t>(pool);
  p.granules.insert(granule);
  if (granule_live_[granule] == 0) ++p.drained;
  if (p.units_per_granule > 0) p.partial.insert(granule);
}

void AvmpAllocator::RemoveGranule(Pool pool, uint32_t granule) {
  PoolState& p = pools_[int(pool)];
  CACHE_DCHECK(granule_live_[granule] == 0u);
  owner_[granule] = kNoPool;
  p.granules.erase(granule);
  --p.drained;
  p.partial.erase(granule);
}

size_t AvmpAllocator::Shortfall(Pool pool) const {
  const size_t free = capacity_units(pool) - pools_[int(pool)].used;
  return reserved_[int(pool)] - std::min(reserved_[int(pool)], free);
}

size_t AvmpAllocator::DemandAwareMove(Pool recipient, bool paper_rule, size_t wanted,
                                      size_t drained) const {
  const Pool donor = recipient == Pool::kKvPage ? Pool::kSsmBlock : Pool::kKvPage;
  const PoolState& r = pools_[int(recipient)];
  const PoolState& d = pools_[int(donor)];
  const double d_cap = double(capacity_units(donor));
  const double dem_d = double(d.used + reserved_[int(donor)]);
  const double dem_r = double(r.used + reserved_[int(recipient)]);
  const double ur = double(r.units_per_granule), ud = double(d.units_per_granule);
  size_t by_rule = 0;
  if (paper_rule) {
    // Look-ahead: the largest m with (1 − th)(cap_d − m·ud) − dem_d − m·ur·ρ > 0, ρ being the
    // donor units each recipient unit brings with it; with no recipient demand, no limit.
    by_rule = std::min(wanted, std::max<size_t>(1, drained / 2));
    if (dem_r > 0) {
      const double keep = 1 - config_.threshold_high;
      const double limit = (keep * d_cap - dem_d) / (keep * ud + ur * (dem_d / dem_r));
      const double m = std::ceil(limit) - 1;  // strictly below the limit
      by_rule = std::min(by_rule, m <= 0 ? size_t{0} : static_cast<size_t>(m));
    }
  }
  size_t by_pull = 0;
  if (const size_t shortfall = Shortfall(recipient); shortfall > 0) {
    // Cover the shortfall, plus what the donor's spare units left behind would attract:
    // m·ur ≥ shortfall + (spare_d − m·ud)·ρ', ρ' the recipient units per donor unit.
    const double spare_d = d_cap - dem_d;
    double m = std::ceil(double(shortfall) / ur);
    if (dem_d > 0) {
      const double rho = dem_r / dem_d;
      m = std::max(m, std::ceil((double(shortfall) + spare_d * rho) / (ur + ud * rho)));
    }
    by_pull = std::min(static_cast<size_t>(m), std::min(wanted, drained));
  }
  return std::max(by_rule, by_pull);
}

bool AvmpAllocator::TryMigrate(Pool recipient, bool deferred) {
  if (!config_.dynamic) return false;
  const Pool donor = recipient == Pool::kKvPage ? Pool::kSsmBlock : Pool::kKvPage;
  PoolState& r = pools_[int(recipient)];
  PoolState& d = pools_[int(donor)];
  if (r.units_per_granule == 0 || d.units_per_granule == 0) return false;
  const bool aware = config_.demand_aware;
  // A pool short of what it promised keeps asking until it is served (rule 3).
  pull_pending_[int(recipient)] = aware && Shortfall(recipient) > 0;
  if (migrated_once_ && ops_ - last_migration_op_ < config_.min_rebalance_interval_ops)
    return false;
  const size_t d_cap = capacity_units(donor);
  if (d_cap == 0) return false;
  // Free units the donor has not promised to its own sequences (the paper: all free units).
  const size_t d_free = d_cap - d.used;
  const size_t d_spare = aware ? d_free - std::min(d_free, reserved_[int(donor)]) : d_free;
  const bool paper_rule = double(d_spare) / double(d_cap) > config_.threshold_high;
  if (!paper_rule && !pull_pending_[int(recipient)]) return false;
  if (d.drained == 0) {
    if (!deferred) ++totals_.migrations_aborted;
    return false;
  }
  std::vector<uint32_t> drained;  // fully free donor granules, highest first
  drained.reserve(d.drained);
  for (auto it = d.granules.rbegin(); it != d.granules.rend() && drained.size() < d.drained; ++it) {
    if (granule_live_[*it] == 0) drained.push_back(*it);
  }
  const size_t wanted =
      (config_.migration_batch_size + r.units_per_granule - 1) / r.units_per_granule;
  size_t moved = 0;
  if (aware) {
    moved = DemandAwareMove(recipient, paper_rule, wanted, drained.size());
    // Never hand over units the donor has promised.
    moved = std::min(moved, d_spare / d.units_per_granule);
  } else {
    // At most half of the donor's drained granules, so one pool's burst cannot drain the other.
    moved = std::min(wanted, std::max<size_t>(1, drained.size() / 2));
  }
  if (moved == 0) {
    if (!deferred) ++totals_.migrations_aborted;
    return false;
  }
  for (size_t i = 0; i < moved; ++i) {
    const uint32_t gi = drained[i];
    RemoveGranule(donor, gi);
    if (committed_[gi]) {
      if (backing_->Decommit(size_t{gi} * granule_bytes_, granule_bytes_).ok()) {
        committed_[gi] = 0;
        totals_.committed_bytes -= granule_bytes_;
      } else {
        // The memory stays mapped and counted as committed; the recipient uses it as it is
        // (contents are undefined either way), so the move is still correct.
        ++totals_.decommit_failures;
      }
    }
    AddGranule(recipient, gi);
  }
  ++totals_.migrations;
  if (!paper_rule) ++pulls_;
  pull_pending_[int(recipient)] = aware && Shortfall(recipient) > 0;
  totals_.bytes_migrated += moved * granule_bytes_;
  totals_.bytes_wasted_to_alignment += moved * (granule_bytes_ - r.units_per_granule * r.stride);
  last_migration_op_ = ops_;
  migrated_once_ = true;
  return true;
}

absl::StatusOr<Handle> AvmpAllocator::Allocate(Pool pool) {
  ++ops_;
  PoolState& p = pools_[int(pool)];
  const Pool other = pool == Pool::kKvPage ? Pool::kSsmBlock : Pool::kKvPage;
  if (pull_pending_[int(other)]) {
    // Rule 3: the other pool is still short of what it promised; it gets this pool's freed
    // granules before a new unit is handed out here.
    if (Shortfall(other) > 0) {
      TryMigrate(other, /*deferred=*/true);
    } else {
      pull_pending_[int(other)] = false;
    }
  }
  if (p.partial.empty() && !TryMigrate(pool, /*deferred=*/false)) {
    ++p.oom_events;
    return absl::ResourceExhaustedError(
        absl::StrCat("pool ", PoolName(pool), " is full (", capacity_units(pool), " units)"));
  }
  return TakeFreeUnit(pool);
}

absl::StatusOr<Handle> AvmpAllocator::AllocateIfFree(Pool pool) {
  if (pools_[int(pool)].partial.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat("pool ", PoolName(pool), " has no free unit"));
  }
  return TakeFreeUnit(pool);
}

absl::StatusOr<Handle> AvmpAllocator::TakeFreeUnit(Pool pool) {
  PoolState& p = pools_[int(pool)];
  // The lowest free unit: the first free slot of the lowest granule that has one.
  const uint32_t gi = *p.partial.begin();
  if (!committed_[gi]) {
    // Before the unit is marked live, so a refusal changes nothing.
    if (absl::Status s = backing_->Commit(size_t{gi} * granule_bytes_, granule_bytes_); !s.ok()) {
      ++totals_.commit_failures;
      ++p.oom_events;
      return absl::ResourceExhaustedError(
          absl::StrCat("pool ", PoolName(pool), ": cannot commit memory: ", s.message()));
    }
    committed_[gi] = 1;
    totals_.committed_bytes += granule_bytes_;
    totals_.peak_committed_bytes = std::max(totals_.peak_committed_bytes, totals_.committed_bytes);
  }
  const size_t u = p.units_per_granule;
  const auto begin = p.live.begin() + size_t{gi} * u;
  const uint32_t index = static_cast<uint32_t>(std::find(begin, begin + u, 0) - p.live.begin());
  p.live[index] = 1;
  ++p.used;
  if (granule_live_[gi] == 0) --p.drained;
  if (++granule_live_[gi] == u) p.partial.erase(gi);
  return Handle(pool, index);
}

void AvmpAllocator::Free(Handle handle) {
  CACHE_CHECK(handle.valid()) << "freeing an invalid handle";
  PoolState& p = pools_[int(handle.pool())];
  const uint32_t index = handle.index();
  CACHE_CHECK(index < p.live.size()) << "handle out of range";
  CACHE_CHECK(p.live[index]) << "double free of " << PoolName(handle.pool()) << " " << index;
  ++ops_;
  p.live[index] = 0;
  --p.used;
  const uint32_t gi = index / static_cast<uint32_t>(p.units_per_granule);
  if (granule_live_[gi]-- == p.units_per_granule) p.partial.insert(gi);
  if (granule_live_[gi] == 0) ++p.drained;
}

std::byte* AvmpAllocator::Resolve(Handle handle) const {
  const PoolState& p = pools_[int(handle.pool())];
  CACHE_DCHECK(handle.index() < p.live.size() && p.live[handle.index()]);
  std::byte* base = backing_->base();
  if (base == nullptr) return nullptr;
  const size_t gi = handle.index() / p.units_per_granule;
  const size_t slot = handle.index() % p.units_per_granule;
  return base + gi * granule_bytes_ + slot * p.stride;
}

size_t AvmpAllocator::unit_bytes(Pool pool) const { return pools_[int(pool)].unit_bytes; }

PoolStats AvmpAllocator::stats(Pool pool) const {
  const PoolState& p = pools_[int(pool)];
  return {.unit_bytes = p.unit_bytes,
          .used_units = p.used,
          .capacity_units = capacity_units(pool),
          .oom_events = p.oom_events};
}

AllocatorStats AvmpAllocator::allocator_stats() const {
  AllocatorStats s = totals_;
  for (int p = 0; p < kNumPools; ++p) s.pools[p] = stats(Pool(p));
  s.operations = ops_;
  return s;
}

}  // namespace tandem::cache
