// Device side of key splits (attention_kernels.h's KeySplits): which keys a split takes, and
// where a (row, head, split)'s output and log-sum-exp go.
#ifndef TANDEM_KERNELS_CUDA_KEY_SPLITS_CUH_
#define TANDEM_KERNELS_CUDA_KEY_SPLITS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention_kernels.h"

namespace tandem::kernels::cuda {

// A split covers at least this many keys (a multiple of every kernel's key tile), so short
// ranges leave the later splits empty.
inline constexpr int64_t kMinSplitKeys = 128;

struct KeySpan {
  int64_t begin;
  int64_t end;
};

// Split `split` of `splits` of [begin, end): consecutive chunks of at least kMinSplitKeys keys.
__device__ __forceinline__ KeySpan SplitSpan(int64_t begin, int64_t end, int split, int splits) {
  int64_t chunk = (end - begin + splits - 1) / splits;
  if (chunk < kMinSplitKeys) chunk = kMinSplitKeys;
  const int64_t first = min(end, begin + split * chunk);
  return {first, min(end, first + chunk)};
}

// Where a (row, head, split)'s output and log-sum-exp go: the call's out and lse unsplit, else
// split `split`'s part of the scratch.
struct SplitDest {
  float* out;
  int64_t ld_out;
  int64_t split_floats;
  float* lse;  // may be null (unsplit only)
  int64_t ld_lse;
  int64_t split_lse;

  static SplitDest For(const KeySplits& splits, int64_t rows, int32_t heads, int32_t head_dim,
                       float* out, int64_t ld_out, float* lse, int64_t ld_lse) {
    if (splits.count <= 1) return {out, ld_out, 0, lse, ld_lse, 0};
    return {splits.out,  int64_t{heads} * head_dim, rows * heads * head_dim, splits.lse, heads,
            rows * heads};
  }
  __device__ float* Out(int split, int64_t t, int32_t head, int32_t head_dim) const {
    return out + split * split_floats + t * ld_out + int64_t{head} * head_dim;
  }
  __device__ float* Lse(int split, int64_t t, int32_t head) const {
    return lse != nullptr ? lse + split * split_lse + t * ld_lse + head : nullptr;
  }
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_KEY_SPLITS_CUH_
