// How much shared memory one block may ask for on the current device.
#ifndef TANDEM_KERNELS_CUDA_SHARED_MEMORY_LIMIT_H_
#define TANDEM_KERNELS_CUDA_SHARED_MEMORY_LIMIT_H_

#include <cstddef>

namespace tandem::kernels::cuda {

// The most shared memory a block may opt into on the calling thread's current device
// (cudaDevAttrMaxSharedMemoryPerBlockOptin): 227 KB on Hopper, 163 KB on the A100, 99 KB on
// sm_86 and sm_89 parts (A10, L4, RTX 30 and 40 series). Kernels that want more than the 48 KB
// every launch gets check it before they take a path that needs it, so that a smaller GPU runs
// the smaller path instead of failing the launch. Asked once per device; 48 KB when the
// question fails.
size_t BlockSharedMemoryLimit();

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
