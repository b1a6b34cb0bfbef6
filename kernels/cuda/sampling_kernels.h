// The sampling read-back's kernel (Ops::ReadBackSampled): one block per row computes the
// logprobs the row's rule asks for from the raw row, copies the row into scratch with its
// penalties applied, picks the argmax for greedy and degenerate rows, and otherwise turns the
// copy into weights and draws by threshold search (kernels/threshold_draw.h). Everything runs in
// a fixed order, so a seeded request gets the same token run after run whatever shares its
// batch.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_
#define TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling_row.h"

namespace tandem::kernels::cuda {

// out[r] = what rules[r] draws from row r of logits ([rows, cols], row stride ld), with the
// penalty tokens seen[rules[r].penalties_begin, penalties_end) (none when that range is not
// within [0, seen_count)), and the logprobs it asks for. scratch holds rows × cols floats (row r
// at r · cols). rules, seen, scratch and out are device memory; the logits are not modified.
cudaError_t SampleRows(cudaStream_t stream, const float* logits, int64_t ld, int64_t rows,
                       int64_t cols, const SamplingRow* rules, const PenaltyToken* seen,
                       int64_t seen_count, float* scratch, SampledToken* out);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_
