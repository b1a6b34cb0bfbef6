#include "cache/baseline_allocators.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cache/check.h"

namespace tandem::cache {
namespace {
constexpr size_t kAlign = 64;
size_t RoundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }
}  // namespace

absl::StatusOr<std::unique_ptr<FixedDualAllocator>> FixedDualAllocator::Create(
    const FixedDualConfig& config) {
  if (!(config.mamba_full_memory_ratio >= 0)) {
    return absl::InvalidArgumentError("fixed-dual: the ratio must be non-negative");
  }
  if (config.kv_page_bytes == 0 && config.ssm_block_bytes == 0) {
    return absl::InvalidArgumentError("fixed-dual: both unit sizes are 0");
  }
  std::unique_ptr<FixedDualAllocator> a(new FixedDualAllocator());
  a->budget_ = config.budget_bytes;
  const double r = config.mamba_full_memory_ratio;
  // A model with only one state kind gives that pool everything.
  double ssm_share = r / (1 + r);
  if (config.ssm_block_bytes == 0) ssm_share = 0;
  if (config.kv_page_bytes == 0) ssm_share = 1;
  const size_t ssm_budget = static_cast<size_t>(double(config.budget_bytes) * ssm_share);
  const size_t budgets[kNumPools] = {config.budget_bytes - ssm_budget, ssm_budget};
  const size_t units[kNumPools] = {config.kv_page_bytes, config.ssm_block_bytes};
  size_t offset = 0;
  for (int p = 0; p < kNumPools; ++p) {
    PoolState& ps = a->pools_[p];
    ps.unit_bytes = units[p];
    ps.stride = RoundUp(units[p], kAlign);
    ps.capacity = ps.stride == 0 ? 0 : budgets[p] / ps.stride;
    if (ps.capacity > 0x7fffffffu) {
      return absl::InvalidArgumentError("fixed-dual: pool exceeds the 31-bit handle space");
    }
    ps.offset = offset;
    offset += ps.capacity * ps.stride;
    ps.live.assign(ps.capacity, 0);
    for (size_t i = ps.capacity; i-- > 0;) ps.free.push_back(static_cast<uint32_t>(i));
  }
  auto backing = CreateBacking(config.backing, offset);
  if (!backing.ok()) return backing.status();
  a->backing_ = *std::move(backing);
  return a;
}

absl::StatusOr<Handle> FixedDualAllocator::Allocate(Pool pool) {
  ++ops_;
  PoolState& p = pools_[int(pool)];
  if (p.free.empty()) {
    ++p.oom_events;
    return absl::ResourceExhaustedError(
        absl::StrCat("pool ", PoolName(pool), " is full (", p.capacity, " units)"));
  }
  const uint32_t i = p.free.back();
  p.free.pop_back();
  p.live[i] = 1;
  ++p.used;
  return Handle(pool, i);
}

void FixedDualAllocator::Free(Handle handle) {
  CACHE_CHECK(handle.valid()) << "freeing an invalid handle";
  PoolState& p = pools_[int(handle.pool())];
  CACHE_CHECK(handle.index() < p.capacity) << "handle out of range";
  CACHE_CHECK(p.live[handle.index()])
      << "double free of " << PoolName(handle.pool()) << " " << handle.index();
  ++ops_;
  p.live[handle.index()] = 0;
  p.free.push_back(handle.index());
  --p.used;
}

std::byte* FixedDualAllocator::Resolve(Handle handle) const {
  const PoolState& p = pools_[int(handle.pool())];
  CACHE_DCHECK(handle.index() < p.capacity && p.live[handle.index()]);
  std::byte* base = backing_->base();
  return base == nullptr ? nullptr : base + p.offset + size_t{handle.index()} * p.stride;
}

PoolStats FixedDualAllocator::stats(Pool pool) const {
  const PoolState& p = pools_[int(pool)];
  return {.unit_bytes = p.unit_bytes,
          .used_units = p.used,
          .capacity_units = p.capacity,
          .oom_events = p.oom_events};
}

AllocatorStats FixedDualAllocator::allocator_stats() const {
  AllocatorStats s;
  for (int p = 0; p < kNumPools; ++p) s.pools[p] = stats(Pool(p));
  s.budget_bytes = budget_;
  s.reserved_bytes = s.peak_reserved_bytes = s.committed_bytes = s.peak_committed_bytes =
      backing_->reserved_bytes();
  s.operations = ops_;
  return s;
}

absl::StatusOr<std::unique_ptr<PaddedUnifiedAllocator>> PaddedUnifiedAllocator::Create(
    const PaddedUnifiedConfig& config) {
  if (config.kv_page_bytes == 0 && config.ssm_block_bytes == 0) {
    return absl::InvalidArgumentError("padded-unified: both unit sizes are 0");
  }
  std::unique_ptr<PaddedUnifiedAllocator> a(new PaddedUnifiedAllocator());
  a->budget_ = config.budget_bytes;
  if (config.kv_page_bytes > 0 && config.ssm_block_bytes > config.kv_page_bytes) {
    a->kv_pages_per_slot_ =
        (config.ssm_block_bytes + config.kv_page_bytes - 1) / config.kv_page_bytes;
  }
  a->kv_unit_ = config.kv_page_bytes * a->kv_pages_per_slot_;
  a->ssm_unit_ = config.ssm_block_bytes;
  a->slot_bytes_ = RoundUp(std::max(a->kv_unit_, a->ssm_unit_), kAlign);
  const size_t slots = config.budget_bytes / a->slot_bytes_;
  if (slots > 0x7fffffffu) {
    return absl::InvalidArgumentError("padded-unified: pool exceeds the 31-bit handle space");
  }
  auto backing = CreateBacking(config.backing, slots * a->slot_bytes_);
  if (!backing.ok()) return backing.status();
  a->backing_ = *std::move(backing);
  a->owner_.assign(slots, 0);
  for (size_t i = slots; i-- > 0;) a->free_.push_back(static_cast<uint32_t>(i));
  return a;
}

absl::StatusOr<Handle> PaddedUnifiedAllocator::AllocateIfFree(Pool pool) {
  if (free_.empty() || unit_bytes(pool) == 0) {
    return absl::ResourceExhaustedError("unified pool has no free slot");
  }
  return Allocate(pool);
}

absl::StatusOr<Handle> PaddedUnifiedAllocator::Allocate(Pool pool) {
  ++ops_;
  if (unit_bytes(pool) == 0) {
    ++oom_[int(pool)];
    return absl::ResourceExhaustedError(absl::StrCat("pool ", PoolName(pool), " has no units"));
  }
  if (free_.empty()) {
    ++oom_[int(pool)];
    return absl::ResourceExhaustedError(
        absl::StrCat("unified pool is full (", owner_.size(), " slots)"));
  }
  const uint32_t i = free_.back();
  free_.pop_back();
  owner_[i] = static_cast<uint8_t>(1 + int(pool));
  ++used_[int(pool)];
  return Handle(pool, i);
}

void PaddedUnifiedAllocator::Free(Handle handle) {
  CACHE_CHECK(handle.valid()) << "freeing an invalid handle";
  CACHE_CHECK(handle.index() < owner_.size()) << "handle out of range";
  CACHE_CHECK(owner_[handle.index()] == 1 + int(handle.pool()))
      << "double free of " << PoolName(handle.pool()) << " " << handle.index();
  ++ops_;
  owner_[handle.index()] = 0;
  free_.push_back(handle.index());
  --used_[int(handle.pool())];
}

std::byte* PaddedUnifiedAllocator::Resolve(Handle handle) const {
  CACHE_DCHECK(handle.index() < owner_.size() && owner_[handle.index()] == 1 + int(handle.pool()));
  std::byte* base = backing_->base();
  return base == nullptr ? nullptr : base + size_t{handle.index()} * slot_bytes_;
}

size_t PaddedUnifiedAllocator::unit_bytes(Pool pool) const {
  return pool == Pool::kKvPage ? kv_unit_ : ssm_unit_;
}

PoolStats PaddedUnifiedAllocator::stats(Pool pool) const {
  return {.unit_bytes = unit_bytes(pool),
          .used_units = used_[int(pool)],
          .capacity_units = owner_.size(),
          .oom_events = oom_[int(pool)]};
}

AllocatorStats PaddedUnifiedAllocator::allocator_stats() const {
  AllocatorStats s;
  for (int p = 0; p < kNumPools; ++p) s.pools[p] = stats(Pool(p));
  s.budget_bytes = budget_;
  s.reserved_bytes = s.peak_reserved_bytes = s.committed_bytes = s.peak_committed_bytes =
      backing_->reserved_bytes();
  s.operations = ops_;
  return s;
}

}  // namespace tandem::cache
