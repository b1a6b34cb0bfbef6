#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/key_splits.h"
#include "kernels/cuda/warp_math.cuh"

namespace tandem::kernels::cuda {
namespace {

// One thread per (row, head, element): the splits' parts weighted by exp(lse − max lse), as
// MergeAttention weighs parts.
__global__ void MergeSplitsKernel(const float* part_out, const float* part_lse, int splits,
                                  int64_t rows, int32_t heads, int32_t head_dim, float* out,
                                  int64_t ld_out, float* lse, int64_t ld_lse) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= rows * heads * head_dim) return;
  const int64_t t = i / (int64_t{heads} * head_dim);
  const int32_t head = static_cast<int32_t>(i / head_dim % heads), e = i % head_dim;
  const int64_t lse_stride = rows * heads, out_stride = lse_stride * head_dim;
  const float* lses = part_lse + t * heads + head;
  float max_l = -INFINITY;
  for (int s = 0; s < splits; ++s) max_l = fmaxf(max_l, lses[s * lse_stride]);
  float value = 0.0f, total = 0.0f;
  if (max_l != -INFINITY) {
    for (int s = 0; s < splits; ++s) {
      const float weight = expf(lses[s * lse_stride] - max_l);
      if (weight == 0.0f) continue;
      total += weight;
      value += weight * part_out[s * out_stride + i];
    }
    value /= total;
  }
  out[t * ld_out + int64_t{head} * head_dim + e] = value;
  if (lse != nullptr && e == 0) {
    lse[t * ld_lse + head] = max_l == -INFINITY ? -INFINITY : max_l + logf(total);
  }
}

}  // namespace

cudaError_t MergeKeySplits(cudaStream_t stream, const KeySplits& splits, int64_t rows,
                           int32_t heads, int32_t head_dim, float* out, int64_t ld_out, float* lse,
                           int64_t ld_lse) {
  if (splits.count <= 1) return cudaSuccess;
  constexpr int kThreads = 256;
  MergeSplitsKernel<<<Blocks(rows * heads * head_dim, kThreads), kThreads, 0, stream>>>(
      splits.out, splits.lse, splits.count, rows, heads, head_dim, out, ld_out, lse, ld_lse);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda
