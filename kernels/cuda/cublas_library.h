// cuBLAS, opened with dlopen when first asked for, with the few functions the CUDA backend calls.
//
// Why not link it: the CUDA build links the runtime statically so that a binary runs where no
// toolkit is installed, and libcublasLt (which libcublas needs) is half a gigabyte — too big to
// link statically or to carry in the GPU test bundle. A machine with a GPU normally has cuBLAS
// (the toolkit's, or the one pip installs beside PyTorch); where it does not, the backend keeps
// its own kernels, and the error says why.
#ifndef TANDEM_KERNELS_CUDA_CUBLAS_LIBRARY_H_
#define TANDEM_KERNELS_CUDA_CUBLAS_LIBRARY_H_

#include <cublas_v2.h>

#include <memory>
#include <string>

namespace tandem::kernels::cuda {

class CublasLibrary {
 public:
  // The process's cuBLAS, searched for once (later calls get the same answer): $TANDEM_CUBLAS
  // alone when set (a path), else "libcublas.so.13" and "libcublas.so" through the loader's
  // search path, else the toolkit's and pip's usual directories. Null with `error` saying what
  // was tried.
  static std::shared_ptr<const CublasLibrary> Default(std::string* error);
  // The library at `path` alone (a file name or a path, as dlopen takes it). Null with `error`
  // set when it cannot be opened or lacks a function.
  static std::shared_ptr<const CublasLibrary> Open(const std::string& path, std::string* error);

  // A library once opened is never closed: cuBLAS carries its own CUDA runtime, whose
  // process-wide state is not meant to be unloaded, and reopening is free.
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  // "cuBLAS 13.0.2 (/usr/local/cuda/lib64/libcublas.so.13)": what was loaded, for messages.
  const std::string& description() const { return description_; }
  // "CUBLAS_STATUS_INVALID_VALUE (7: an unsupported value or parameter was passed to the
  // function)".
  std::string StatusName(cublasStatus_t status) const;

  // cublasGemmEx is overloaded in C++ (a wrapper for the old cudaDataType compute types), so its
  // type is spelled out.
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void*, const void*, cudaDataType, int,
                                      const void*, cudaDataType, int, const void*, void*,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  GemmExFn gemm_ex = nullptr;

 private:
  CublasLibrary() = default;
  // Resolves the functions of the library `handle` (opened as `name`); false with `error`
  // naming a missing one.
  bool Resolve(void* handle, const std::string& name, std::string* error);

  std::string description_;
  decltype(&cublasGetStatusString) status_string_ = nullptr;
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_CUBLAS_LIBRARY_H_
