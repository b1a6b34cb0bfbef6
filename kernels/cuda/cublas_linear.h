// y = x · wᵀ (+ bias), the prefill Linear, through cuBLAS on one stream. dense_kernels' tiled
// fp32 GEMM reached ~15 TFLOP/s on an H200 (512 × 4096 → 14336), far below the fp32 peak of the
// CUDA cores and further still below the tensor cores' (bench/cuda/cuda_kernels_bench.cc times
// both paths side by side).
//
// Two precisions, chosen per call:
//   exact         fp32 weights, fp32 products and sums (CUBLAS_COMPUTE_32F, no TF32): the
//                 results of the CPU backend up to the order of the sums. 16-bit and int8
//                 weights are not taken: dense_kernels widens them to fp32 exactly, where cuBLAS
//                 would need the activations in 16 bits too.
//   tensor cores  fp32 weights in TF32 (10-bit mantissas); bf16 / f16 weights with x rounded
//                 to the same format (fp32 sums). Each term is off by up to ~2e-3 (TF32),
//                 4e-3 (bf16) or 5e-4 (f16) relative: logits no longer match the CPU to 1e-3,
//                 which is why it is opt-in.
// int8 weights are never taken (dense_kernels dequantizes them on load).
#ifndef TANDEM_KERNELS_CUDA_CUBLAS_LINEAR_H_
#define TANDEM_KERNELS_CUDA_CUBLAS_LINEAR_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/weight_matrix.h"

namespace tandem::kernels::cuda {

class CublasLinear {
 public:
  // From this many rows of x (as dense_kernels' tiled kernel). Below it a product is a few dot
  // products per weight row, memory-bound, and dense_kernels' decode kernel reads each weight
  // once at close to the copy bandwidth.
  static constexpr int64_t kMinRows = 16;

  // A handle bound to `stream` (with a workspace of its own, so cuBLAS never allocates while
  // work is queued, or while a CUDA graph is captured). The calling thread's current device is
  // the handle's. Null with `error` set when cuBLAS refuses (no driver new enough, no memory).
  static std::unique_ptr<CublasLinear> Create(std::shared_ptr<const CublasLibrary> library,
                                              cudaStream_t stream, std::string* error);
  ~CublasLinear();
  CublasLinear(const CublasLinear&) = delete;
  CublasLinear& operator=(const CublasLinear&) = delete;

  // Whether Run takes this product (rows, weight format and precision, sizes that fit cuBLAS's
  // 32-bit dimensions, naturally aligned weights); otherwise dense_kernels' Linear computes it.
  static bool Takes(int64_t m, const WeightMatrix& w, int64_t ld_x, int64_t ld_y,
                    bool tensor_cores);

  // Enqueues y = x · wᵀ + bias (bias may be null) on the stream: "" when queued, else what
  // failed, naming the shape and the cuBLAS status. Only products Takes() accepts.
  std::string Run(bool tensor_cores, const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                  const float* bias, float* y, int64_t ld_y);

  // Whether Run would first have to grow its scratch for this product (the 16-bit copy of x on
  // the tensor-core path), waiting for the stream's queued GEMMs that read the old one.
  bool NeedsToGrow(bool tensor_cores, int64_t m, const WeightMatrix& w) const;
  // Grows the scratch now if so, so that Run then neither allocates nor waits (it may be
  // captured into a CUDA graph): "" or what failed.
  std::string Prepare(bool tensor_cores, int64_t m, const WeightMatrix& w);
  // Where that scratch is: a recorded Run is replayable only while it is the same.
  const void* scratch() const { return narrowed_.get(); }

  const CublasLibrary& library() const { return *library_; }

 private:
  CublasLinear(std::shared_ptr<const CublasLibrary> library, cublasHandle_t handle,
               cudaStream_t stream, DeviceBuffer<std::byte> workspace)
      : library_(std::move(library)),
        handle_(handle),
        stream_(stream),
        workspace_(std::move(workspace)) {}

  std::shared_ptr<const CublasLibrary> library_;
  cublasHandle_t handle_;
  cudaStream_t stream_;
  // Elements of the 16-bit copy of x that the product needs (0 on the fp32 path).
  static size_t NarrowedElements(bool tensor_cores, int64_t m, const WeightMatrix& w);

  DeviceBuffer<std::byte> workspace_;
  // x rounded to 16 bits for the tensor-core path, grown to the largest m × k seen (warm-up:
  // the first prefill chunk through each matrix shape), never per token.
  DeviceBuffer<uint16_t> narrowed_;
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_CUBLAS_LINEAR_H_
