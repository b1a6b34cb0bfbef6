// Where a key or value lives in the paged KV cache, for device code (the layout is PagedKv's, in
// kernels/ops.h: a page holds, per layer, every KV head's keys then every KV head's values, each
// head a block of page_tokens × head_dim floats).
#ifndef TANDEM_KERNELS_CUDA_PAGED_KV_CUH_
#define TANDEM_KERNELS_CUDA_PAGED_KV_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels::cuda {

// PagedKv::head_block() is host code; the same product for the device.
__device__ __forceinline__ int64_t HeadBlock(const PagedKv& kv) {
  return int64_t{kv.page_tokens} * kv.head_dim;
}

__device__ __forceinline__ const float* KeyAt(const PagedKv& kv, int64_t pos, int32_t head) {
  return kv.pages[pos / kv.page_tokens] + kv.layer_offset + int64_t{head} * HeadBlock(kv) +
         (pos % kv.page_tokens) * kv.head_dim;
}

__device__ __forceinline__ const float* ValueAt(const PagedKv& kv, int64_t pos, int32_t head) {
  return KeyAt(kv, pos, kv.num_kv_heads + head);
}

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_PAGED_KV_CUH_
