// The sampling read-back's kernel (Ops::ReadBackSampled): one block per row penalises the row
// in place, picks the argmax for greedy and degenerate rows, and otherwise turns the row into
// weights in place and draws by threshold search (kernels/threshold_draw.h), all in a fixed
// order, so a seeded request gets the same token run after run whatever shares its batch.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_
#define TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling_row.h"

namespace tandem::kernels::cuda {

// out[r] = the token rules[r] draws from row r of logits ([rows, cols], row stride ld), with the
// penalty tokens seen[rules[r].penalties_begin, penalties_end) (none when that range is not
// within [0, seen_count)). rules, seen and out are device memory; the rows are overwritten.
cudaError_t SampleRows(cudaStream_t stream, float* logits, int64_t ld, int64_t rows, int64_t cols,
                       const SamplingRow* rules, const PenaltyToken* seen, int64_t seen_count,
                       int32_t* out);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_
