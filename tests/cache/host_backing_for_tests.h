// Host memory behind a MemoryBacking whose every call a test may override: to count copies,
// make commits fail, or pretend to map coarser pieces, as a device's backing would.
#ifndef TANDEM_TESTS_CACHE_HOST_BACKING_FOR_TESTS_H_
#define TANDEM_TESTS_CACHE_HOST_BACKING_FOR_TESTS_H_

#include <memory>

#include "cache/memory_backing.h"

namespace tandem::cache::testing {

class HostBackingForTests : public MemoryBacking {
 public:
  explicit HostBackingForTests(size_t bytes) : real_(*CreateBacking(BackingKind::kHost, bytes)) {}
  std::byte* base() const override { return real_->base(); }
  size_t reserved_bytes() const override { return real_->reserved_bytes(); }
  size_t granularity() const override { return real_->granularity(); }
  absl::Status Commit(size_t offset, size_t bytes) override { return real_->Commit(offset, bytes); }
  absl::Status Decommit(size_t offset, size_t bytes) override {
    return real_->Decommit(offset, bytes);
  }
  absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) override {
    return real_->CopyBytes(dst, src, bytes);
  }
  absl::Status ZeroBytes(std::byte* dst, size_t bytes) override {
    return real_->ZeroBytes(dst, bytes);
  }

 private:
  std::unique_ptr<MemoryBacking> real_;
};

}  // namespace tandem::cache::testing

#endif  // TANDEM_TESTS_CACHE_HOST_BACKING_FOR_TESTS_H_
