#include "kernels/cuda/shared_memory_limit.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/handled_error.h"

namespace tandem::kernels::cuda {
namespace {

std::atomic<size_t> override_bytes{0};  // 0: none

}  // namespace

ScopedBlockSharedMemoryLimit::ScopedBlockSharedMemoryLimit(size_t bytes) {
  override_bytes.store(bytes, std::memory_order_relaxed);
}

ScopedBlockSharedMemoryLimit::~ScopedBlockSharedMemoryLimit() {
  override_bytes.store(0, std::memory_order_relaxed);
}

size_t BlockSharedMemoryLimit() {
  if (const size_t forced = override_bytes.load(std::memory_order_relaxed); forced > 0) {
    return forced;
  }
  constexpr size_t kDefault = size_t{48} << 10;
  constexpr int kDevices = 64;
  static std::atomic<size_t> known[kDevices] = {};  // 0: not asked yet
  int device = 0;
  if (Handled(cudaGetDevice(&device)) != cudaSuccess || device < 0) return kDefault;
  if (device < kDevices) {
    const size_t limit = known[device].load(std::memory_order_relaxed);
    if (limit > 0) return limit;
  }
  int optin = 0;
  const size_t limit =
      Handled(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) ==
                  cudaSuccess &&
              optin > 0
          ? static_cast<size_t>(optin)
          : kDefault;
  if (device < kDevices) known[device].store(limit, std::memory_order_relaxed);
  return limit;
}

}  // namespace tandem::kernels::cuda
