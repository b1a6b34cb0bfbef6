#include "cache/block_allocator.h"

#include <cstring>

namespace tandem::cache {

std::string PoolName(Pool pool) { return pool == Pool::kKvPage ? "kv_page" : "ssm_block"; }

absl::Status BlockAllocator::CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status BlockAllocator::ZeroBytes(std::byte* dst, size_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
  return absl::OkStatus();
}

}  // namespace tandem::cache
