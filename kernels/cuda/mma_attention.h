// Attention of many query rows over the same keys on the tensor cores (attention_kernels.h's
// first shape: prefill chunks, Hydragen's shared prefix). By default in about fp32 precision:
// the products QKᵀ and PV run as three TF32 matrix products each (a = a_big + a_small split,
// the small·small term dropped), which keeps the result within fp32 rounding of the CUDA-core
// kernels while the tensor cores do the arithmetic; TensorCorePrecision::kTf32 runs one (the
// big halves). Internal to the attention kernels.
#ifndef TANDEM_KERNELS_CUDA_MMA_ATTENTION_H_
#define TANDEM_KERNELS_CUDA_MMA_ATTENTION_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/ops.h"

namespace tandem::kernels::cuda {

// Whether the tensor-core kernel takes the call: one sequence's keys (no per-row tables), a
// head dim it is built for (64, 80, 96 or 128), 16-byte aligned query rows and K/V blocks, and
// enough virtual rows (rows × query heads per KV head) to fill its tiles.
bool MmaAttentionTakes(const PartialAttentionArgs& a);
// The same without the rows needed to fill its tiles: whether it can take the call at all (the
// batch-invariant mode sends every row through it, a decode row too).
bool MmaAttentionFits(const PartialAttentionArgs& a);
// Key splits for a call of few blocks over many keys (Hydragen's prefix: a few hundred rows over
// thousands of keys), so that the GPU has blocks enough; 1 where it would not take the call.
int MmaAttentionSplits(const PartialAttentionArgs& a, int multiprocessors);
cudaError_t LaunchMmaAttention(cudaStream_t stream, const PartialAttentionArgs& a,
                               const KeySplits& splits, TensorCorePrecision precision);
// A varlen pass (AttentionArgs::cu_seqlens) whose sequences attend tile by tile: each sequence's
// rows over its own pages, causal, in one launch (no splits: a pass's prefill rows are many).
bool VarlenMmaAttentionTakes(const AttentionArgs& a);
bool VarlenMmaAttentionFits(const AttentionArgs& a);
cudaError_t LaunchVarlenMmaAttention(cudaStream_t stream, const AttentionArgs& a,
                                     TensorCorePrecision precision);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_MMA_ATTENTION_H_
