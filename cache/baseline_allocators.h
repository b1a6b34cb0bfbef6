// The allocators AVMP is compared against, behind the same BlockAllocator interface.
//
// FixedDualAllocator (SGLang-style): two pools split once at start-up. The split follows SGLang's
// --mamba-full-memory-ratio r as SGLang computes it: the SSM pool gets
// budget·r/(1+r) and the KV pool the rest, so the default r = 0.9 gives SSM about 47%, not 90%.
//
// PaddedUnifiedAllocator (vLLM-style): one pool of equal slots. vLLM raises the attention block
// size until an attention page is at least as large as one SSM state, so every slot is that
// size; a KV page then holds kv_pages_per_slot() × page_tokens tokens, and an SSM block wastes
// the rest of its slot.
#ifndef TANDEM_CACHE_BASELINE_ALLOCATORS_H_
#define TANDEM_CACHE_BASELINE_ALLOCATORS_H_

#include <array>
#include <memory>
#include <vector>

#include "cache/block_allocator.h"
#include "cache/memory_backing.h"

namespace tandem::cache {

struct FixedDualConfig {
  size_t kv_page_bytes = 0;
  size_t ssm_block_bytes = 0;
  size_t budget_bytes = 0;
  double mamba_full_memory_ratio = 0.9;  // SSM:KV bytes, SGLang's default
  BackingKind backing = BackingKind::kHost;
};

class FixedDualAllocator final : public BlockAllocator {
 public:
  static absl::StatusOr<std::unique_ptr<FixedDualAllocator>> Create(const FixedDualConfig& config);

  absl::StatusOr<Handle> Allocate(Pool pool) override;
  void Free(Handle handle) override;
  std::byte* Resolve(Handle handle) const override;
  size_t unit_bytes(Pool pool) const override { return pools_[int(pool)].unit_bytes; }
  PoolStats stats(Pool pool) const override;
  AllocatorStats allocator_stats() const override;

 private:
  struct PoolState {
    size_t unit_bytes = 0, stride = 0, offset = 0, capacity = 0, used = 0;
    uint64_t oom_events = 0;
    std::vector<uint32_t> free;  // LIFO
    std::vector<uint8_t> live;
  };
  FixedDualAllocator() = default;
  size_t budget_ = 0;
  uint64_t ops_ = 0;
  std::unique_ptr<MemoryBacking> backing_;
  std::array<PoolState, kNumPools> pools_;
};

struct PaddedUnifiedConfig {
  size_t kv_page_bytes = 0;  // one page of page_tokens tokens
  size_t ssm_block_bytes = 0;
  size_t budget_bytes = 0;
  BackingKind backing = BackingKind::kHost;
};

class PaddedUnifiedAllocator final : public BlockAllocator {
 public:
  static absl::StatusOr<std::unique_ptr<PaddedUnifiedAllocator>> Create(
      const PaddedUnifiedConfig& config);

  absl::StatusOr<Handle> Allocate(Pool pool) override;
  // Its pools share one set of slots, which stats() counts as each pool's capacity.
  absl::StatusOr<Handle> AllocateIfFree(Pool pool) override;
  void Free(Handle handle) override;
  std::byte* Resolve(Handle handle) const override;
  // kKvPage: kv_pages_per_slot() base pages; kSsmBlock: one SSM state.
  size_t unit_bytes(Pool pool) const override;
  // capacity_units is the shared slot count for both pools.
  PoolStats stats(Pool pool) const override;
  AllocatorStats allocator_stats() const override;

  // How many base KV pages (of the configured page_tokens) one slot holds.
  size_t kv_pages_per_slot() const { return kv_pages_per_slot_; }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  PaddedUnifiedAllocator() = default;
  size_t budget_ = 0, slot_bytes_ = 0, kv_pages_per_slot_ = 1, kv_unit_ = 0, ssm_unit_ = 0;
  uint64_t ops_ = 0;
  std::unique_ptr<MemoryBacking> backing_;
  std::vector<uint32_t> free_;
  std::vector<uint8_t> owner_;  // 0 = free, 1 + pool
  size_t used_[kNumPools] = {0, 0};
  uint64_t oom_[kNumPools] = {0, 0};
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_BASELINE_ALLOCATORS_H_
