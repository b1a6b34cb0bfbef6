#include "engine/cuda_compute_device.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda_memory_backing.h"
#include "engine/cuda_tensor_placer.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_info.h"

namespace tandem::engine {
namespace {

class CudaDevice final : public ComputeDevice {
 public:
  CudaDevice(int index, std::unique_ptr<models::TensorPlacer> placer)
      : index_(index), placer_(std::move(placer)) {}

  std::string name() const override { return absl::StrCat("cuda:", index_); }
  bool on_host() const override { return false; }
  models::TensorPlacer* weight_placer() override { return placer_.get(); }

  absl::StatusOr<std::unique_ptr<kernels::Ops>> CreateOps(const ComputeOptions& options) override {
    std::string error;
    kernels::cuda::CudaOpsOptions cuda_options;
    cuda_options.tensor_core_matmul = options.tensor_core_matmul;
    cuda_options.graphs = options.cuda_graphs;
    cuda_options.batch_invariant = options.batch_invariant;
    std::unique_ptr<kernels::cuda::CudaOps> ops =
        kernels::cuda::CudaOps::Create(index_, cuda_options, &error);
    if (ops == nullptr) return absl::FailedPreconditionError(error);
    return std::unique_ptr<kernels::Ops>(std::move(ops));
  }

  absl::StatusOr<std::unique_ptr<cache::MemoryBacking>> CreateStateBacking(size_t bytes) override {
    return CreateCudaMemoryBacking(index_, bytes);
  }

 private:
  int index_;
  std::unique_ptr<models::TensorPlacer> placer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeDevice>> OpenCudaDevice(int index) {
  std::string error;
  const std::vector<kernels::cuda::DeviceInfo> devices = kernels::cuda::ListDevices(&error);
  if (devices.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("device 'cuda:", index,
                                                      "': no CUDA device is usable (",
                                                      error.empty() ? "none visible" : error, ")"));
  }
  if (index >= static_cast<int>(devices.size())) {
    return absl::FailedPreconditionError(absl::StrCat("device 'cuda:", index, "': only ",
                                                      devices.size(), " CUDA devices are visible"));
  }
  absl::StatusOr<std::unique_ptr<models::TensorPlacer>> placer = CreateCudaTensorPlacer(index);
  if (!placer.ok()) return placer.status();
  return std::unique_ptr<ComputeDevice>(new CudaDevice(index, *std::move(placer)));
}

}  // namespace tandem::engine
