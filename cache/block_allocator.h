// The memory interface between the model state and whoever owns memory. A sequence's KV cache is
// a list of KV pages and its recurrent state is one SSM block; both are taken from a
// BlockAllocator as fixed-size units named by 32-bit handles. The AVMP allocator (two pools that
// trade capacity) and its baselines implement this interface; ArenaAllocator is the plain one.
#ifndef TANDEM_CACHE_BLOCK_ALLOCATOR_H_
#define TANDEM_CACHE_BLOCK_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tandem::cache {

enum class Pool : uint8_t {
  kKvPage = 0,    // page_tokens tokens of K and V over all attention layers
  kSsmBlock = 1,  // one sequence's (or one checkpoint's) conv + SSM state over all SSM layers
};
inline constexpr int kNumPools = 2;
std::string PoolName(Pool pool);

// A unit of memory: the top bit names the pool, the low 31 bits index that pool's page table.
class Handle {
 public:
  static constexpr uint32_t kInvalid = 0xffffffffu;
  constexpr Handle() = default;
  constexpr Handle(Pool pool, uint32_t index)
      : raw_((static_cast<uint32_t>(pool) << 31) | (index & 0x7fffffffu)) {}
  static constexpr Handle FromRaw(uint32_t raw) {
    Handle h;
    h.raw_ = raw;
    return h;
  }
  constexpr bool valid() const { return raw_ != kInvalid; }
  constexpr Pool pool() const { return static_cast<Pool>(raw_ >> 31); }
  constexpr uint32_t index() const { return raw_ & 0x7fffffffu; }
  constexpr uint32_t raw() const { return raw_; }
  friend constexpr bool operator==(Handle a, Handle b) { return a.raw_ == b.raw_; }

 private:
  uint32_t raw_ = kInvalid;
};

struct PoolStats {
  size_t unit_bytes = 0;
  size_t used_units = 0;
  size_t capacity_units = 0;
  uint64_t oom_events = 0;  // allocations refused for lack of memory
};

// Whole-allocator figures, including the capacity that moved between pools.
struct AllocatorStats {
  PoolStats pools[kNumPools];
  size_t budget_bytes = 0;         // the memory this allocator was given
  size_t reserved_bytes = 0;       // virtual/physical range reserved for the pools
  size_t peak_reserved_bytes = 0;  // the most ever reserved at once
  size_t committed_bytes = 0;      // physically backed now (granules in use since last decommit)
  size_t peak_committed_bytes = 0;
  uint64_t migrations = 0;                 // capacity moves between pools
  uint64_t migrations_aborted = 0;         // wanted a move but no donor granule was free
  uint64_t bytes_migrated = 0;             // capacity moved, in bytes of address range
  uint64_t bytes_wasted_to_alignment = 0;  // recipient bytes unusable for lack of a whole unit
  uint64_t operations = 0;                 // Allocate + Free calls (the logical clock)
  // Backing calls the OS refused: a failed commit fails that allocation; a failed decommit
  // leaves the granule's memory mapped (and counted in committed_bytes), still correct.
  uint64_t commit_failures = 0;
  uint64_t decommit_failures = 0;
};

class BlockAllocator {
 public:
  virtual ~BlockAllocator() = default;

  // One unit of `pool`. RESOURCE_EXHAUSTED when the pool cannot grow (or its memory could
  // not be committed).
  [[nodiscard]] virtual absl::StatusOr<Handle> Allocate(Pool pool) = 0;
  // One unit of `pool` only if one is free now: an optional use (speculative decoding's
  // borrowed blocks) must not move capacity between the pools, evict anything, or count an
  // out-of-memory event. RESOURCE_EXHAUSTED otherwise. The default serves allocators whose
  // Allocate does nothing more than take a free unit (fixed pools, arenas).
  [[nodiscard]] virtual absl::StatusOr<Handle> AllocateIfFree(Pool pool);
  // Returns a unit. Freeing an invalid or already free handle is a programming error.
  virtual void Free(Handle handle) = 0;
  // The memory of a live unit: unit_bytes(pool) bytes, aligned to 64 bytes, stable until freed.
  virtual std::byte* Resolve(Handle handle) const = 0;

  virtual size_t unit_bytes(Pool pool) const = 0;
  virtual PoolStats stats(Pool pool) const = 0;

  // Copies or clears bytes of live units (pointers from Resolve), complete on return. Callers use
  // these rather than touching unit memory, which may be a GPU's (MemoryBacking::CopyBytes). The
  // defaults are for host memory.
  [[nodiscard]] virtual absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes);
  [[nodiscard]] virtual absl::Status ZeroBytes(std::byte* dst, size_t bytes);

  // Everything above and below in one snapshot. The default covers allocators that never move
  // capacity.
  virtual AllocatorStats allocator_stats() const {
    AllocatorStats s;
    for (int p = 0; p < kNumPools; ++p) {
      s.pools[p] = stats(static_cast<Pool>(p));
      s.reserved_bytes += s.pools[p].capacity_units * s.pools[p].unit_bytes;
    }
    s.budget_bytes = s.peak_reserved_bytes = s.reserved_bytes;
    return s;
  }
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_BLOCK_ALLOCATOR_H_
