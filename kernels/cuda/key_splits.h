// The merge of key splits (attention_kernels.h's KeySplits) into the call's output: internal to
// the attention kernels.
#ifndef TANDEM_KERNELS_CUDA_KEY_SPLITS_H_
#define TANDEM_KERNELS_CUDA_KEY_SPLITS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/attention_kernels.h"

namespace tandem::kernels::cuda {

// out (and lse, when not null) of `rows` × `heads` from the splits' parts, each weighted by
// exp(its lse − the largest), as MergeAttention weighs parts. Nothing to do for one split.
cudaError_t MergeKeySplits(cudaStream_t stream, const KeySplits& splits, int64_t rows,
                           int32_t heads, int32_t head_dim, float* out, int64_t ld_out, float* lse,
                           int64_t ld_lse);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_KEY_SPLITS_H_
