#include "cache/arena_allocator.h"

#include <cstdlib>
#include <utility>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/check.h"

namespace tandem::cache {
namespace {
constexpr size_t kAlign = 64;
}

absl::StatusOr<std::unique_ptr<ArenaAllocator>> ArenaAllocator::Create(
    const ArenaConfig& config, const BackingFactory& make_backing) {
  std::unique_ptr<ArenaAllocator> alloc(new ArenaAllocator());
  size_t backed_bytes = 0;  // with a backing: the pools one after the other
  size_t offsets[kNumPools] = {};
  const std::pair<size_t, size_t> sizes[kNumPools] = {{config.kv_page_bytes, config.kv_pages},
                                                      {config.ssm_block_bytes, config.ssm_blocks}};
  for (int p = 0; p < kNumPools; ++p) {
    const auto [unit, count] = sizes[p];
    const std::string name = PoolName(static_cast<Pool>(p));
    if (count > 0 && unit == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pool ", name, ": ", count, " units requested with a unit size of 0"));
    }
    if (count > 0x7fffffffu) {
      return absl::InvalidArgumentError(
          absl::StrCat("pool ", name, ": ", count, " units exceed the 31-bit handle space"));
    }
    Arena& a = alloc->arenas_[p];
    a.unit_bytes = unit;
    a.stride = (unit + kAlign - 1) / kAlign * kAlign;
    if (count > 0 && a.stride > std::numeric_limits<size_t>::max() / count) {
      return absl::InvalidArgumentError(absl::StrCat("pool ", name, ": size overflows"));
    }
    if (count > 0 && make_backing) {
      if (backed_bytes > std::numeric_limits<size_t>::max() - a.stride * count) {
        return absl::InvalidArgumentError(absl::StrCat("pool ", name, ": size overflows"));
      }
      offsets[p] = backed_bytes;
      backed_bytes += a.stride * count;
    } else if (count > 0) {
      void* mem = std::aligned_alloc(kAlign, a.stride * count);
      if (mem == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("pool ", name, ": cannot allocate ", a.stride * count, " bytes"));
      }
      a.memory = {static_cast<std::byte*>(mem), &std::free};
    }
    a.free_list.reserve(count);
    for (size_t i = count; i-- > 0;) a.free_list.push_back(static_cast<uint32_t>(i));
    a.live.assign(count, false);
    a.stats.unit_bytes = unit;
    a.stats.capacity_units = count;
  }
  if (make_backing && backed_bytes > 0) {
    absl::StatusOr<std::unique_ptr<MemoryBacking>> backing = make_backing(backed_bytes);
    if (!backing.ok()) return backing.status();
    alloc->backing_ = *std::move(backing);
    if (alloc->backing_->reserved_bytes() < backed_bytes) {
      return absl::InternalError(absl::StrCat("arena: the backing reserved ",
                                              alloc->backing_->reserved_bytes(), " of ",
                                              backed_bytes, " bytes"));
    }
    if (absl::Status s = alloc->backing_->Commit(0, alloc->backing_->reserved_bytes()); !s.ok()) {
      return s;
    }
    for (int p = 0; p < kNumPools; ++p) {
      if (alloc->arenas_[p].stats.capacity_units == 0) continue;
      // The backing owns the memory.
      alloc->arenas_[p].memory = {alloc->backing_->base() + offsets[p], [](void*) {}};
    }
  }
  return alloc;
}

absl::Status ArenaAllocator::CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  if (backing_ != nullptr) return backing_->CopyBytes(dst, src, bytes);
  return BlockAllocator::CopyBytes(dst, src, bytes);
}

absl::Status ArenaAllocator::ZeroBytes(std::byte* dst, size_t bytes) {
  if (backing_ != nullptr) return backing_->ZeroBytes(dst, bytes);
  return BlockAllocator::ZeroBytes(dst, bytes);
}

absl::StatusOr<Handle> ArenaAllocator::Allocate(Pool pool) {
  Arena& a = arena(pool);
  if (a.free_list.empty()) {
    ++a.stats.oom_events;
    return absl::ResourceExhaustedError(
        absl::StrCat("pool ", PoolName(pool), " is full (", a.stats.capacity_units, " units)"));
  }
  const uint32_t index = a.free_list.back();
  a.free_list.pop_back();
  a.live[index] = true;
  ++a.stats.used_units;
  return Handle(pool, index);
}

void ArenaAllocator::Free(Handle handle) {
  TANDEM_CHECK(handle.valid(), "freeing an invalid handle");
  Arena& a = arena(handle.pool());
  TANDEM_CHECK(handle.index() < a.live.size(), "handle out of range");
  TANDEM_CHECK(a.live[handle.index()], "double free");
  a.live[handle.index()] = false;
  a.free_list.push_back(handle.index());
  --a.stats.used_units;
}

std::byte* ArenaAllocator::Resolve(Handle handle) const {
  const Arena& a = arena(handle.pool());
  TANDEM_CHECK(handle.index() < a.live.size() && a.live[handle.index()], "resolving a free handle");
  return a.memory.get() + size_t{handle.index()} * a.stride;
}

size_t ArenaAllocator::unit_bytes(Pool pool) const { return arena(pool).unit_bytes; }
PoolStats ArenaAllocator::stats(Pool pool) const { return arena(pool).stats; }

}  // namespace tandem::cache
