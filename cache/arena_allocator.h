// The plain BlockAllocator: each pool is a fixed number of units carved out of one allocation,
// with a free list. No capacity moves between pools; that is the AVMP allocator's job.
#ifndef TANDEM_CACHE_ARENA_ALLOCATOR_H_
#define TANDEM_CACHE_ARENA_ALLOCATOR_H_

#include <array>
#include <memory>
#include <vector>

#include "cache/block_allocator.h"
#include "cache/memory_backing.h"

namespace tandem::cache {

struct ArenaConfig {
  size_t kv_page_bytes = 0;
  size_t kv_pages = 0;
  size_t ssm_block_bytes = 0;
  size_t ssm_blocks = 0;
};

class ArenaAllocator final : public BlockAllocator {
 public:
  // INVALID_ARGUMENT for a pool with units but a zero unit size, or sizes that overflow.
  // `make_backing`, when given, provides the memory (both pools in one range, committed whole)
  // instead of the host heap: a GPU's, for a single sequence on a device.
  static absl::StatusOr<std::unique_ptr<ArenaAllocator>> Create(
      const ArenaConfig& config, const BackingFactory& make_backing = {});

  absl::StatusOr<Handle> Allocate(Pool pool) override;
  void Free(Handle handle) override;
  std::byte* Resolve(Handle handle) const override;
  size_t unit_bytes(Pool pool) const override;
  PoolStats stats(Pool pool) const override;
  absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) override;
  absl::Status ZeroBytes(std::byte* dst, size_t bytes) override;

 private:
  struct Arena {
    size_t unit_bytes = 0;
    size_t stride = 0;  // unit_bytes rounded up to the alignment
    std::unique_ptr<std::byte, void (*)(void*)> memory{nullptr, nullptr};
    std::vector<uint32_t> free_list;
    std::vector<bool> live;
    PoolStats stats;
  };
  ArenaAllocator() = default;
  Arena& arena(Pool pool) { return arenas_[static_cast<int>(pool)]; }
  const Arena& arena(Pool pool) const { return arenas_[static_cast<int>(pool)]; }

  std::array<Arena, kNumPools> arenas_;
  std::unique_ptr<MemoryBacking> backing_;  // when the memory is not the host heap's
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_ARENA_ALLOCATOR_H_
