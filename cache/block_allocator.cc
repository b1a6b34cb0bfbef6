#include "cache/block_allocator.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::cache {

std::string PoolName(Pool pool) { return pool == Pool::kKvPage ? "kv_page" : "ssm_block"; }

absl::StatusOr<Handle> BlockAllocator::AllocateIfFree(Pool pool) {
  const PoolStats s = stats(pool);
  if (s.used_units >= s.capacity_units) {
    return absl::ResourceExhaustedError(absl::StrCat("pool ", PoolName(pool), " has no free unit"));
  }
  return Allocate(pool);
}

absl::Status BlockAllocator::CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status BlockAllocator::ZeroBytes(std::byte* dst, size_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
  return absl::OkStatus();
}

}  // namespace tandem::cache
