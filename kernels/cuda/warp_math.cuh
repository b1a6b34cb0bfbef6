// Warp-wide sums and maxima, and grid sizing, shared by the sequence and attention kernels.
#ifndef TANDEM_KERNELS_CUDA_WARP_MATH_CUH_
#define TANDEM_KERNELS_CUDA_WARP_MATH_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::cuda {

inline constexpr int kWarp = 32;

// The sum over the warp's 32 lanes, returned to every lane (a butterfly: the same order on
// every lane, so every lane gets the same bits).
__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Blocks of `per_block` items that cover `items`.
inline unsigned Blocks(int64_t items, int64_t per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_WARP_MATH_CUH_
