// Read-only memory mapping of a whole file. The mapping lives as long as the object; share it
// with std::shared_ptr when views into it (tensors) must outlive the code that opened it.
#ifndef TANDEM_MODELS_MAPPED_FILE_H_
#define TANDEM_MODELS_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace tandem::models {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path: NotFound (missing), PermissionDenied
  // (unreadable), FailedPrecondition (a directory or another non-regular file).
  // An empty file is valid and has size() == 0.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Page-aligned start of the file's bytes (nullptr for an empty file).
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_MAPPED_FILE_H_
