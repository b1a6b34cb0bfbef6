// CUDA versions of the dense ops of kernels/ops.h (the contracts are there): row gathers, copies
// and adds, the norms, RoPE, the gated activation and Linear for weights in every WeightFormat. Pointers are device memory,
// weights included (a WeightMatrix whose data and row_scales point into device memory, naturally
// aligned as cudaMalloc leaves them). Each call enqueues its work on `stream` and returns the
// launch's error (cudaErrorInvalidValue for arguments the kernels cannot take); execution errors
// surface at the stream's next synchronisation, as usual in CUDA.
//
// Numerics follow the CPU backend: fp32 activations and fp32 sums (reduction order differs, so
// results agree to fp32 rounding, not bit for bit); 16-bit and int8 weights are widened on load.
#ifndef TANDEM_KERNELS_CUDA_DENSE_KERNELS_H_
#define TANDEM_KERNELS_CUDA_DENSE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops.h"
#include "kernels/weight_matrix.h"

namespace tandem::kernels::cuda {

// `ids` is device memory here (the host-side Ops call uploads them first).
cudaError_t GatherRows(cudaStream_t stream, const WeightMatrix& table, const int32_t* ids,
                       int64_t count, float* out, int64_t ld_out);
cudaError_t CopyRows(cudaStream_t stream, const float* src, int64_t ld_src, int64_t rows,
                     int64_t cols, float* dst, int64_t ld_dst);
cudaError_t AddRows(cudaStream_t stream, const float* src, int64_t ld_src, int64_t rows,
                    int64_t cols, float* dst, int64_t ld_dst);
// x[r, c] *= factor in place, or with `divide` x[r, c] /= factor (IEEE division).
cudaError_t ScaleRows(cudaStream_t stream, float* x, int64_t ld_x, int64_t rows, int64_t cols,
                      float factor, bool divide);

// `count` rows picked by index (device memory): dst[i] = src[rows[i]], or with `scatter`
// dst[rows[i]] = src[i] (rows distinct).
cudaError_t IndexedCopyRows(cudaStream_t stream, bool scatter, const float* src, int64_t ld_src,
                            const int32_t* rows, int64_t count, int64_t cols, float* dst,
                            int64_t ld_dst);

cudaError_t RmsNorm(cudaStream_t stream, const float* x, int64_t ld_x, int64_t rows, int64_t dim,
                    const float* weight, float eps, float* out, int64_t ld_out);

cudaError_t GatedRmsNorm(cudaStream_t stream, const float* y, int64_t ld_y, const float* z,
                         int64_t ld_z, int64_t rows, int64_t dim, int32_t groups,
                         const float* weight, float eps, float* out, int64_t ld_out);

// sums[r] = Σ_c x[r,c]² (one block per row), and x[r,c] = weight[c] · x[r,c] / sqrt(sums[r] /
// count + eps) in place: a norm whose row is spread over tensor-parallel workers.
cudaError_t RowSquareSums(cudaStream_t stream, const float* x, int64_t ld_x, int64_t rows,
                          int64_t cols, float* sums);
cudaError_t RmsNormBySums(cudaStream_t stream, float* x, int64_t ld_x, int64_t rows, int64_t cols,
                          const float* sums, int64_t count, const float* weight, float eps);

// In place; head_dim even, at most 1024. Row t is at position start_pos + t, or at positions[t]
// (device memory) when that is given: a decode batch.
cudaError_t Rope(cudaStream_t stream, float* x, int64_t ld_x, int64_t tokens, int32_t heads,
                 int32_t head_dim, int64_t start_pos, const int64_t* positions, float theta);

// x[r, c] = act(x[r, c]) in place.
cudaError_t Activate(cudaStream_t stream, Activation act, float* x, int64_t ld_x, int64_t rows,
                     int64_t cols);
// out may be gate (same row stride).
cudaError_t GatedActivation(cudaStream_t stream, Activation act, const float* gate,
                            int64_t ld_gate, const float* up, int64_t ld_up, int64_t rows,
                            int64_t cols, float* out, int64_t ld_out);

// out[r] (device memory) = kernels::ArgmaxRow of row r of src: one block per row.
cudaError_t ArgmaxRows(cudaStream_t stream, const float* src, int64_t ld_src, int64_t rows,
                       int64_t cols, int32_t* out);

// y = x · wᵀ + bias. Below 16 rows of x (decode), one warp per output column (two for 16-bit
// weights) and tile of up to 8 rows, reading the weights once per tile with 16-byte loads where
// k and the alignment allow: the memory-bound shape. From 16 rows (prefill), 64 × 64 output
// tiles through shared memory, fp32 on the CUDA cores; CudaOps sends those through cuBLAS when
// it can (cublas_linear.h), so this is the path without it and for 16-bit and int8 weights.
// `same_for_every_row` (the batch-invariant mode): the decode kernel at every row count, chosen
// by the weights' shape and the rows' alignment alone, so that a row's output is the same bits
// whatever else is in the call (each of its sums is ordered by k alone).
cudaError_t Linear(cudaStream_t stream, const float* x, int64_t ld_x, int64_t m,
                   const WeightMatrix& w, const float* bias, float* y, int64_t ld_y,
                   bool same_for_every_row = false);

// Linear for `groups` weight matrices at once (MoE experts, all [n, k] in `format`): group e
// multiplies rows [offsets[e], offsets[e+1]) of x into the same rows of y. offsets [groups + 1],
// weights [groups] (data pointers) and scales ([groups] row-scale pointers, int8 only) are
// device memory; max_rows (host) bounds any group's rows and sizes the grid. No bias.
// `same_for_every_row`: the 8-row kernel whatever max_rows is, as for Linear.
cudaError_t GroupedLinear(cudaStream_t stream, const float* x, int64_t ld_x, int64_t max_rows,
                          const int64_t* offsets, int32_t groups, WeightFormat format,
                          const void* const* weights, const float* const* scales, int64_t n,
                          int64_t k, float* y, int64_t ld_y, bool same_for_every_row = false);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_DENSE_KERNELS_H_
