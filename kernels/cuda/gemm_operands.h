// The two small kernels around a cuBLAS GEMM (kernels/cuda/cublas_linear.h): fp32 activations
// narrowed to the 16-bit format of the weights before it (tensor cores multiply two 16-bit
// operands), and the bias added to every row after it. Pointers are device memory; each call
// enqueues on `stream` and returns the launch's error.
#ifndef TANDEM_KERNELS_CUDA_GEMM_OPERANDS_H_
#define TANDEM_KERNELS_CUDA_GEMM_OPERANDS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels::cuda {

// out[r][c] = x[r][c] rounded to nearest even, as bf16 (`bf16`) or f16 bits: rows × cols of x
// (row stride ld_x floats) into out (row stride ld_out elements). f16 overflows to ±inf past
// 65504, as the conversion does.
cudaError_t NarrowRows(cudaStream_t stream, const float* x, int64_t ld_x, int64_t rows,
                       int64_t cols, bool bf16, uint16_t* out, int64_t ld_out);

// y[r][c] += bias[c] for rows × cols of y.
cudaError_t AddBias(cudaStream_t stream, const float* bias, int64_t rows, int64_t cols, float* y,
                    int64_t ld_y);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_GEMM_OPERANDS_H_
