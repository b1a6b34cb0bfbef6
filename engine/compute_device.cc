#include "engine/compute_device.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kernels/backends.h"
#ifdef TANDEM_HAVE_CUDA
#include "engine/cuda_compute_device.h"
#endif

namespace tandem::engine {
namespace {

class CpuDevice final : public ComputeDevice {
 public:
  std::string name() const override { return "cpu"; }
  bool on_host() const override { return true; }
  models::TensorPlacer* weight_placer() override { return nullptr; }
  absl::StatusOr<std::unique_ptr<kernels::Ops>> CreateOps(const ComputeOptions& options) override {
    return kernels::MakeCpuOps(options.threads, options.batch_invariant);
  }
  absl::StatusOr<std::unique_ptr<cache::MemoryBacking>> CreateStateBacking(size_t bytes) override {
    return cache::CreateBacking(cache::BackingKind::kHost, bytes);
  }
};

// The N of "cuda:N" ("cuda" alone is 0); -1 for a name that is not a CUDA device's.
int CudaIndex(const std::string& name) {
  if (name == "cuda") return 0;
  if (name.rfind("cuda:", 0) != 0) return -1;
  int index = -1;
  if (!absl::SimpleAtoi(absl::string_view(name).substr(5), &index) || index < 0 || index > 1023) return -1;
  return index;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeDevice>> ComputeDevice::Open(const std::string& name) {
  if (name == "cpu") return std::unique_ptr<ComputeDevice>(new CpuDevice());
  const int index = CudaIndex(name);
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", name, "' (expected cpu, cuda or cuda:N)"));
  }
#ifdef TANDEM_HAVE_CUDA
  return OpenCudaDevice(index);
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "device '", name, "': this build has no CUDA support (configure with -DTANDEM_CUDA=ON)"));
#endif
}

}  // namespace tandem::engine
