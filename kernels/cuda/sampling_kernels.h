// The sampling read-back's kernel (Ops::ReadBackSampled): for each row, the logprobs the row's
// rule asks for from the raw row, a copy of the row in scratch with its penalties applied, the
// argmax for greedy and degenerate rows, and otherwise the copy turned into weights and a draw by
// threshold search (kernels/threshold_draw.h). A row takes one block, or on GPUs with thread
// block clusters (sm_90) a cluster of up to 8 blocks when the rows are too few to fill the
// device: a search is ~30 passes over the row, and one block per row left a 128K-vocabulary
// row at ~0.8 ms on an H200. Every sum is of integers (fixed-point weights) and every other
// reduction a maximum, so a row's token and logprobs are the same bits run after run, whatever
// shares its batch and however many blocks it gets.
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
// blocks_per_row 0 picks the number of blocks per row; tests name one (a power of two up to
// MostSampleBlocksPerRow()).
cudaError_t SampleRows(cudaStream_t stream, const float* logits, int64_t ld, int64_t rows,
                       int64_t cols, const SamplingRow* rules, const PenaltyToken* seen,
                       int64_t seen_count, float* scratch, SampledToken* out,
                       int blocks_per_row = 0);

// The most blocks SampleRows may give a row on the current device (1 without clusters).
int MostSampleBlocksPerRow();

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_
