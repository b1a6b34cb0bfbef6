// A BlockAllocator with no memory and no capacity limit: it only hands out distinct handles and
// checks that each is freed once. Simulations whose budget is enforced by the prefix cache's
// capacity_bytes (Marconi's single-capacity model) run on it.
#ifndef TANDEM_CACHE_COUNTING_ALLOCATOR_H_
#define TANDEM_CACHE_COUNTING_ALLOCATOR_H_

#include <array>
#include <vector>

#include "cache/block_allocator.h"

namespace tandem::cache {

class CountingAllocator final : public BlockAllocator {
 public:
  CountingAllocator(size_t kv_page_bytes, size_t ssm_block_bytes);

  absl::StatusOr<Handle> Allocate(Pool pool) override;
  void Free(Handle handle) override;
  std::byte* Resolve(Handle) const override { return nullptr; }
  size_t unit_bytes(Pool pool) const override { return pools_[int(pool)].unit_bytes; }
  PoolStats stats(Pool pool) const override;

 private:
  struct PoolState {
    size_t unit_bytes = 0;
    size_t used = 0;
    std::vector<uint32_t> free;
    std::vector<bool> live;
  };
  std::array<PoolState, kNumPools> pools_;
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_COUNTING_ALLOCATOR_H_
