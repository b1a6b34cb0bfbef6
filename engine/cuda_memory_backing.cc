#include "engine/cuda_memory_backing.h"

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

 private:
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
