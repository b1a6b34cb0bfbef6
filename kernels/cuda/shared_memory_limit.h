// How much shared memory one block may ask for on the current device.
#ifndef TANDEM_KERNELS_CUDA_SHARED_MEMORY_LIMIT_H_
#define TANDEM_KERNELS_CUDA_SHARED_MEMORY_LIMIT_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>

#include "kernels/cuda/handled_error.h"

namespace tandem::kernels::cuda {

// The most shared memory a block may opt into on the calling thread's current device
// (cudaDevAttrMaxSharedMemoryPerBlockOptin): 227 KB on Hopper, 163 KB on the A100, 99 KB on
// sm_86 and sm_89 parts (A10, L4, RTX 30 and 40 series). Kernels that want more than the 48 KB
// every launch gets check it before they take a path that needs it, so that a smaller GPU runs
// the smaller path instead of failing the launch. Asked once per device; 48 KB when the
// question fails.
size_t BlockSharedMemoryLimit();

// Lets the kernel kKernel take `bytes` of dynamic shared memory (above the 48 KB a launch gets
// without asking) on the calling thread's current device. The attribute is the function's and
// stays set, so the runtime is asked once per (kernel, device, size) here, not on every launch.
template <auto kKernel>
cudaError_t AllowSharedMemory(size_t bytes) {
  constexpr int kDevices = 64;
  static std::atomic<size_t> allowed[kDevices] = {};  // bytes set so far, 0: none
  int device = 0;
  if (Handled(cudaGetDevice(&device)) != cudaSuccess) return cudaErrorInvalidDevice;
  const bool cached = device >= 0 && device < kDevices;
  if (cached && allowed[device].load(std::memory_order_relaxed) == bytes) return cudaSuccess;
  const cudaError_t status = Handled(cudaFuncSetAttribute(
      kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  if (status == cudaSuccess && cached) allowed[device].store(bytes, std::memory_order_relaxed);
  return status;
}

// For tests: while alive, BlockSharedMemoryLimit() answers `bytes` on every device, so that a
// large GPU runs the paths a smaller one takes. One at a time.
class ScopedBlockSharedMemoryLimit {
 public:
  explicit ScopedBlockSharedMemoryLimit(size_t bytes);
  ~ScopedBlockSharedMemoryLimit();
  ScopedBlockSharedMemoryLimit(const ScopedBlockSharedMemoryLimit&) = delete;
  ScopedBlockSharedMemoryLimit& operator=(const ScopedBlockSharedMemoryLimit&) = delete;
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_SHARED_MEMORY_LIMIT_H_
