#include "cache/counting_allocator.h"

#include "absl/strings/str_cat.h"
#include "cache/check.h"

namespace tandem::cache {

CountingAllocator::CountingAllocator(size_t kv_page_bytes, size_t ssm_block_bytes) {
  pools_[0].unit_bytes = kv_page_bytes;
  pools_[1].unit_bytes = ssm_block_bytes;
}

absl::StatusOr<Handle> CountingAllocator::Allocate(Pool pool) {
  PoolState& p = pools_[int(pool)];
  uint32_t index;
  if (!p.free.empty()) {
    index = p.free.back();
    p.free.pop_back();
  } else {
    if (p.live.size() >= 0x7fffffffu) {
      return absl::ResourceExhaustedError(absl::StrCat("pool ", PoolName(pool), " handle space"));
    }
    index = static_cast<uint32_t>(p.live.size());
    p.live.push_back(false);
  }
  p.live[index] = true;
  ++p.used;
  return Handle(pool, index);
}

void CountingAllocator::Free(Handle handle) {
  CACHE_CHECK(handle.valid()) << "freeing an invalid handle";
  PoolState& p = pools_[int(handle.pool())];
  CACHE_CHECK(handle.index() < p.live.size() && p.live[handle.index()])
      << "double free of " << PoolName(handle.pool()) << " " << handle.index();
  p.live[handle.index()] = false;
  p.free.push_back(handle.index());
  --p.used;
}

PoolStats CountingAllocator::stats(Pool pool) const {
  const PoolState& p = pools_[int(pool)];
  return {.unit_bytes = p.unit_bytes, .used_units = p.used, .capacity_units = p.live.size()};
}

}  // namespace tandem::cache
