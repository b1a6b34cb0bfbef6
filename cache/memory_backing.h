// Where the allocators' bytes live. A backing reserves one contiguous address range up front and
// commits or decommits physical memory for granule-aligned pieces of it, so moving capacity
// between pools never copies and never needs a second reservation. HostBacking does this with
// mmap/madvise; the CUDA backing (engine/cuda_memory_backing.h) with cuMemAddressReserve /
// cuMemCreate / cuMemMap. AccountingBacking holds no memory at all: simulations use it to
// replay millions of allocations of multi-megabyte units without touching RAM.
#ifndef TANDEM_CACHE_MEMORY_BACKING_H_
#define TANDEM_CACHE_MEMORY_BACKING_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::cache {

enum class BackingKind : uint8_t {
  kHost,        // anonymous mmap, MADV_DONTNEED to decommit
  kAccounting,  // no memory; Resolve() of allocators on it returns nullptr
};

class MemoryBacking {
 public:
  virtual ~MemoryBacking() = default;
  // Start of the reserved range, or nullptr for an accounting backing.
  virtual std::byte* base() const = 0;
  virtual size_t reserved_bytes() const = 0;
  // Makes [offset, offset + bytes) usable. Offsets and sizes are multiples of granularity().
  [[nodiscard]] virtual absl::Status Commit(size_t offset, size_t bytes) = 0;
  // Returns the physical memory of [offset, offset + bytes); contents are lost (read as zero
  // after the next Commit).
  [[nodiscard]] virtual absl::Status Decommit(size_t offset, size_t bytes) = 0;
  // The OS page size for host memory; 1 for accounting.
  virtual size_t granularity() const = 0;

  // Writes inside the range, for the engine's few copies of state it does not compute (a
  // restored checkpoint, a shared KV page's private copy, a fresh SSM block): host code may not
  // touch device memory, so the owner of the memory performs them. They are complete when the
  // call returns. The defaults are memcpy and memset, for host memory.
  [[nodiscard]] virtual absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes);
  [[nodiscard]] virtual absl::Status ZeroBytes(std::byte* dst, size_t bytes);
};

// Makes a backing that reserves at least `bytes` somewhere other than the host (a GPU's memory).
using BackingFactory = std::function<absl::StatusOr<std::unique_ptr<MemoryBacking>>(size_t bytes)>;

// Reserves `bytes` (rounded up to the granularity). RESOURCE_EXHAUSTED if the OS refuses.
absl::StatusOr<std::unique_ptr<MemoryBacking>> CreateBacking(BackingKind kind, size_t bytes);
std::string BackingKindName(BackingKind kind);

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_MEMORY_BACKING_H_
