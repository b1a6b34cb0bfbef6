#include "engine/cuda_tensor_placer.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_copies.h"
#include "kernels/cuda/handled_error.h"

namespace tandem::engine {
namespace {

class CudaTensorPlacer final : public models::TensorPlacer {
 public:
  absl::StatusOr<const void*> Place(const void* host, size_t bytes) override {
    std::string error;
    const void* device = copies_.Copy(host, bytes, &error);
    if (device == nullptr) return absl::ResourceExhaustedError(error);
    return device;
  }

 private:
  kernels::cuda::DeviceCopies copies_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<models::TensorPlacer>> CreateCudaTensorPlacer(int device) {
  if (const cudaError_t status = kernels::cuda::Handled(cudaSetDevice(device));
      status != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", device, ": ", cudaGetErrorString(status)));
  }
  return std::unique_ptr<models::TensorPlacer>(new CudaTensorPlacer());
}

}  // namespace tandem::engine
