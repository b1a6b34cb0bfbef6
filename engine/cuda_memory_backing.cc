#include "engine/cuda_memory_backing.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/vmm_range.h"

namespace tandem::engine {
namespace {

class CudaMemoryBacking final : public cache::MemoryBacking {
 public:
  explicit CudaMemoryBacking(std::unique_ptr<kernels::cuda::VmmRange> range)
      : range_(std::move(range)) {}
  std::byte* base() const override { return static_cast<std::byte*>(range_->base()); }
  size_t reserved_bytes() const override { return range_->reserved_bytes(); }
  size_t granularity() const override { return range_->granularity(); }

  absl::Status Commit(size_t offset, size_t bytes) override {
    std::string error;
    if (range_->Map(offset, bytes, &error)) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat("device memory: ", error));
  }
  absl::Status Decommit(size_t offset, size_t bytes) override {
    std::string error;
    if (range_->Unmap(offset, bytes, &error)) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("device memory: ", error));
  }

  // On the legacy default stream, then waited for: the compute stream (non-blocking) may read
  // the bytes in its next pass, which is enqueued only after this returns.
  absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr), "copy");
  }
  absl::Status ZeroBytes(std::byte* dst, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    return Check(cudaMemsetAsync(dst, 0, bytes, nullptr), "clear");
  }

 private:
  static absl::Status Check(cudaError_t issued, const char* what) {
    const cudaError_t status = issued == cudaSuccess ? cudaStreamSynchronize(nullptr) : issued;
    if (status == cudaSuccess) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("device memory ", what, ": ", cudaGetErrorString(status)));
  }

  std::unique_ptr<kernels::cuda::VmmRange> range_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<cache::MemoryBacking>> CreateCudaMemoryBacking(int device,
                                                                              size_t bytes) {
  std::string error;
  std::unique_ptr<kernels::cuda::VmmRange> range =
      kernels::cuda::VmmRange::Create(device, bytes, &error);
  if (range == nullptr) {
    const std::string what = absl::StrCat("GPU ", device, ": ", error);
    // Reserving is the step that fails for lack of addresses; anything before it is setup.
    if (error.find("cuMemAddressReserve") != std::string::npos) {
      return absl::ResourceExhaustedError(what);
    }
    return absl::FailedPreconditionError(what);
  }
  return std::unique_ptr<cache::MemoryBacking>(new CudaMemoryBacking(std::move(range)));
}

}  // namespace tandem::engine
