#include "kernels/cuda/cublas_linear.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/cuda/gemm_operands.h"
#include "kernels/cuda/handled_error.h"

namespace tandem::kernels::cuda {
namespace {

// cuBLAS's advice for Hopper (smaller parts need less); one per handle, allocated once.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Rows of the narrowed x start 16-byte aligned: the tensor-core kernels load 16-byte vectors and
// cuBLAS picks slower ones for an operand whose leading dimension does not allow them.
constexpr int64_t kNarrowedAlignment = 8;  // 16-bit elements

int64_t NarrowedLd(int64_t k) {
  return (k + kNarrowedAlignment - 1) / kNarrowedAlignment * kNarrowedAlignment;
}

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

std::string Shape(bool tensor_cores, int64_t m, const WeightMatrix& w) {
  return std::string("Linear (cuBLAS ") + (tensor_cores ? "tensor cores " : "exact ") +
         std::string(WeightFormatName(w.format)) + ", " + std::to_string(m) + " × " +
         std::to_string(w.cols) + " → " + std::to_string(w.rows) + ")";
}

}  // namespace

std::unique_ptr<CublasLinear> CublasLinear::Create(std::shared_ptr<const CublasLibrary> library,
                                                   cudaStream_t stream, std::string* error) {
  DeviceBuffer<std::byte> workspace;
  if (const cudaError_t status = workspace.Allocate(kWorkspaceBytes); status != cudaSuccess) {
    *error = std::string("cuBLAS workspace: ") + cudaGetErrorString(status);
    return nullptr;
  }
  cublasHandle_t handle = nullptr;
  cublasStatus_t status = library->create(&handle);
  const char* step = "cublasCreate";
  // DEFAULT_MATH never trades precision for speed (no TF32 for CUBLAS_COMPUTE_32F): the
  // tensor-core path asks for it per call through its compute type instead.
  if (status == CUBLAS_STATUS_SUCCESS) {
    step = "cublasSetMathMode";
    status = library->set_math_mode(handle, CUBLAS_DEFAULT_MATH);
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    step = "cublasSetStream";
    status = library->set_stream(handle, stream);
  }
  // After the stream: setting a stream puts the handle back on cuBLAS's own workspace pool.
  if (status == CUBLAS_STATUS_SUCCESS) {
    step = "cublasSetWorkspace";
    status = library->set_workspace(handle, workspace.get(), kWorkspaceBytes);
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    *error = library->description() + ": " + step + ": " + library->StatusName(status);
    if (handle != nullptr) library->destroy(handle);
    return nullptr;
  }
  return std::unique_ptr<CublasLinear>(
      new CublasLinear(std::move(library), handle, stream, std::move(workspace)));
}

CublasLinear::~CublasLinear() {
  // The workspace (freed after this) may still be in use by queued GEMMs.
  cudaStreamSynchronize(stream_);
  library_->destroy(handle_);
}

bool CublasLinear::Takes(int64_t m, const WeightMatrix& w, int64_t ld_x, int64_t ld_y,
                         bool tensor_cores) {
  bool format = false;
  switch (w.format) {
    case WeightFormat::kF32:
      format = true;
      break;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      format = tensor_cores;
      break;
    case WeightFormat::kI8:
      break;
  }
  return format && m >= kMinRows && w.rows > 0 && w.cols > 0 && FitsInt(m) && FitsInt(w.rows) &&
         FitsInt(w.cols) && FitsInt(ld_x) && FitsInt(ld_y) && FitsInt(NarrowedLd(w.cols)) &&
         reinterpret_cast<uintptr_t>(w.data) % WeightElementBytes(w.format) == 0;
}

size_t CublasLinear::NarrowedElements(bool tensor_cores, int64_t m, const WeightMatrix& w) {
  if (!tensor_cores || w.format == WeightFormat::kF32) return 0;
  return static_cast<size_t>(m) * static_cast<size_t>(NarrowedLd(w.cols));
}

bool CublasLinear::NeedsToGrow(bool tensor_cores, int64_t m, const WeightMatrix& w) const {
  return narrowed_.size() < NarrowedElements(tensor_cores, m, w);
}

std::string CublasLinear::Prepare(bool tensor_cores, int64_t m, const WeightMatrix& w) {
  if (!NeedsToGrow(tensor_cores, m, w)) return "";
  // Queued GEMMs may still read the buffer about to be freed.
  cudaError_t status = cudaStreamSynchronize(stream_);
  if (status == cudaSuccess) status = narrowed_.Allocate(NarrowedElements(tensor_cores, m, w));
  if (status != cudaSuccess) {
    return Shape(tensor_cores, m, w) + ": narrowed x: " + cudaGetErrorString(Handled(status));
  }
  return "";
}

std::string CublasLinear::Run(bool tensor_cores, const float* x, int64_t ld_x, int64_t m,
                              const WeightMatrix& w, const float* bias, float* y, int64_t ld_y) {
  const int n = static_cast<int>(w.rows), k = static_cast<int>(w.cols);
  cudaDataType type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  const void* b = x;
  int64_t ldb = ld_x;
  if (w.format == WeightFormat::kF32) {
    if (tensor_cores) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  } else {
    // 16-bit weights: the tensor cores multiply two operands of one format, so x is rounded to
    // the weights' format first (the sums stay fp32).
    const bool bf16 = w.format == WeightFormat::kBF16;
    type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    ldb = NarrowedLd(w.cols);
    if (std::string failure = Prepare(tensor_cores, m, w); !failure.empty()) return failure;
    if (const cudaError_t status = NarrowRows(stream_, x, ld_x, m, k, bf16, narrowed_.get(), ldb);
        status != cudaSuccess) {
      return Shape(tensor_cores, m, w) + ": narrowing x: " + cudaGetErrorString(status);
    }
    b = narrowed_.get();
  }
  // Column-major, as cuBLAS sees it: yᵀ (n × m, ld_y) = W (row-major n × k, so column-major
  // k × n, transposed) · xᵀ (column-major k × m, ldb).
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t status =
      library_->gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, static_cast<int>(m), k, &one, w.data,
                        type, k, b, type, static_cast<int>(ldb), &zero, y, CUDA_R_32F,
                        static_cast<int>(ld_y), compute, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return Shape(tensor_cores, m, w) + ": cublasGemmEx: " + library_->StatusName(status);
  }
  if (bias != nullptr) {
    if (const cudaError_t s = AddBias(stream_, bias, m, w.rows, y, ld_y); s != cudaSuccess) {
      return Shape(tensor_cores, m, w) + ": bias: " + cudaGetErrorString(s);
    }
  }
  return "";
}

}  // namespace tandem::kernels::cuda
