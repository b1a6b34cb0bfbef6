// The routing half of a mixture of experts on the device, so that a MoE layer never waits for
// the host: the top-k choice per token, the tokens bucketed by expert (each expert's rows then
// contiguous, for GroupedLinear), and the weighted combination back into token order. Every
// pointer is device memory; each call enqueues on `stream` and returns the launch error.
#ifndef TANDEM_KERNELS_CUDA_MOE_KERNELS_H_
#define TANDEM_KERNELS_CUDA_MOE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels::cuda {

inline constexpr int kMaxMoeExperts = 1024;

// Per token: its top_k experts and their weights by `routing` (kernels/moe_routing.h, the host
// backends' code) from its `experts` router logits. chosen and weights are [tokens, top_k];
// routing.bias, when set, is device memory.
cudaError_t MoeRoute(cudaStream_t stream, const float* logits, int64_t tokens, int32_t experts,
                     int32_t top_k, const MoeRouting& routing, int32_t* chosen, float* weights);

// Buckets the tokens·top_k choices by expert, in token order inside each expert: expert e's
// entries are [offsets[e], offsets[e+1]) (offsets has experts + 1 values), rows[i] is the token
// of bucketed entry i, and position[t·top_k + j] is where choice j of token t went.
cudaError_t MoeBucket(cudaStream_t stream, const int32_t* chosen, int64_t tokens, int32_t experts,
                      int32_t top_k, int64_t* offsets, int32_t* rows, int32_t* position);

// out[t] = Σ_j weights[t·top_k + j] · y[position[t·top_k + j]], over j in order (no atomics: the
// same sums every run).
cudaError_t MoeCombine(cudaStream_t stream, const float* y, int64_t ld_y, const int32_t* position,
                       const float* weights, int64_t tokens, int32_t top_k, int64_t hidden,
                       float* out, int64_t ld_out);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_MOE_KERNELS_H_
