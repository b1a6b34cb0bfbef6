#include "cache/memory_backing.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::cache {
namespace {

size_t RoundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }

class HostBacking final : public MemoryBacking {
 public:
  HostBacking(std::byte* base, size_t bytes, size_t page)
      : base_(base), bytes_(bytes), page_(page) {}
  ~HostBacking() override {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  std::byte* base() const override { return base_; }
  size_t reserved_bytes() const override { return bytes_; }
  size_t granularity() const override { return page_; }

  // Anonymous private memory is committed by the kernel on first touch; nothing to do here
  // beyond the range check.
  absl::Status Commit(size_t offset, size_t bytes) override { return Check(offset, bytes); }

  absl::Status Decommit(size_t offset, size_t bytes) override {
    if (absl::Status s = Check(offset, bytes); !s.ok()) return s;
    if (bytes == 0) return absl::OkStatus();
    if (madvise(base_ + offset, bytes, MADV_DONTNEED) != 0) {
      return absl::InternalError(absl::StrCat("madvise(MADV_DONTNEED) failed: ", strerror(errno)));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Check(size_t offset, size_t bytes) const {
    if (offset % page_ != 0 || bytes % page_ != 0 || offset > bytes_ || bytes > bytes_ - offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("range [", offset, ", +", bytes, ") is not page-aligned inside ", bytes_));
    }
    return absl::OkStatus();
  }
  std::byte* base_;
  size_t bytes_;
  size_t page_;
};

class AccountingBacking final : public MemoryBacking {
 public:
  explicit AccountingBacking(size_t bytes) : bytes_(bytes) {}
  std::byte* base() const override { return nullptr; }
  size_t reserved_bytes() const override { return bytes_; }
  size_t granularity() const override { return 1; }
  absl::Status Commit(size_t, size_t) override { return absl::OkStatus(); }
  absl::Status Decommit(size_t, size_t) override { return absl::OkStatus(); }

 private:
  size_t bytes_;
};

}  // namespace

absl::Status MemoryBacking::CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status MemoryBacking::ZeroBytes(std::byte* dst, size_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
  return absl::OkStatus();
}

std::string BackingKindName(BackingKind kind) {
  return kind == BackingKind::kHost ? "host" : "accounting";
}

absl::StatusOr<std::unique_ptr<MemoryBacking>> CreateBacking(BackingKind kind, size_t bytes) {
  if (kind == BackingKind::kAccounting) return std::make_unique<AccountingBacking>(bytes);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t size = RoundUp(bytes, page);
  if (size == 0) return std::make_unique<HostBacking>(nullptr, 0, page);
  // MAP_NORESERVE: reserve address space only; physical pages arrive on first touch.
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve ", size, " bytes of address space: ", strerror(errno)));
  }
  return std::make_unique<HostBacking>(static_cast<std::byte*>(mem), size, page);
}

}  // namespace tandem::cache
