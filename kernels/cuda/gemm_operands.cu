#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/gemm_operands.h"

namespace tandem::kernels::cuda {
namespace {

// A block covers kThreads columns of up to kMaxRowBlocks rows at a time; rows beyond the grid
// loop (prefill chunks are far below 65535 rows, but nothing here needs them to be).
constexpr int kThreads = 256;
constexpr int64_t kMaxRowBlocks = 65535;

__global__ void NarrowRowsKernel(const float* x, int64_t ld_x, int64_t rows, int64_t cols,
                                 bool bf16, uint16_t* out, int64_t ld_out) {
  const int64_t c = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float v = x[r * ld_x + c];
    out[r * ld_out + c] =
        bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
  }
}

__global__ void AddBiasKernel(const float* bias, int64_t rows, int64_t cols, float* y,
                              int64_t ld_y) {
  const int64_t c = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (c >= cols) return;
  const float b = bias[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) y[r * ld_y + c] += b;
}

bool Grid(int64_t rows, int64_t cols, dim3* grid) {
  const int64_t col_blocks = (cols + kThreads - 1) / kThreads;
  if (col_blocks > INT32_MAX) return false;
  *grid =
      dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(std::min(rows, kMaxRowBlocks)));
  return true;
}

}  // namespace

cudaError_t NarrowRows(cudaStream_t stream, const float* x, int64_t ld_x, int64_t rows,
                       int64_t cols, bool bf16, uint16_t* out, int64_t ld_out) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  dim3 grid;
  if (!Grid(rows, cols, &grid)) return cudaErrorInvalidValue;
  NarrowRowsKernel<<<grid, kThreads, 0, stream>>>(x, ld_x, rows, cols, bf16, out, ld_out);
  return cudaGetLastError();
}

cudaError_t AddBias(cudaStream_t stream, const float* bias, int64_t rows, int64_t cols, float* y,
                    int64_t ld_y) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  dim3 grid;
  if (!Grid(rows, cols, &grid)) return cudaErrorInvalidValue;
  AddBiasKernel<<<grid, kThreads, 0, stream>>>(bias, rows, cols, y, ld_y);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda
