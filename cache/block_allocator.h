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

class BlockAllocator {
 public:
  virtual ~BlockAllocator() = default;

  // One unit of `pool`. RESOURCE_EXHAUSTED when the pool cannot grow.
  virtual absl::StatusOr<Handle> Allocate(Pool pool) = 0;
  // Returns a unit. Freeing an invalid or already free handle is a programming error.
  virtual void Free(Handle handle) = 0;
  // The memory of a live unit: unit_bytes(pool) bytes, aligned to 64 bytes, stable until freed.
  virtual std::byte* Resolve(Handle handle) const = 0;

  virtual size_t unit_bytes(Pool pool) const = 0;
  virtual PoolStats stats(Pool pool) const = 0;
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_BLOCK_ALLOCATOR_H_
