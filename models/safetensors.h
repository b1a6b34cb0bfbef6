// One .safetensors file: an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the raw
// little-endian row-major tensor data (offsets relative to the end of the header).
// Every field is validated at open; afterwards every TensorInfo's bytes lie inside the file.
#ifndef TANDEM_MODELS_SAFETENSORS_H_
#define TANDEM_MODELS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/dtype.h"
#include "models/mapped_file.h"

namespace tandem::models {

// Headers larger than this are rejected as corrupt (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100 * 1000 * 1000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  // Byte range within the whole file (header length and header already added).
  uint64_t file_offset = 0;
  uint64_t byte_size = 0;
};

// Result of parsing a header out of an in-memory copy of the file.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;              // sorted by name
  std::map<std::string, std::string> metadata;  // string values of "__metadata__"
};

// Parses and validates the header of a safetensors file whose complete bytes are `bytes`.
// `path` is used only in error messages. Never reads outside `bytes`, whatever they hold.
absl::StatusOr<SafetensorsHeader> ParseSafetensors(std::span<const uint8_t> bytes,
                                                   std::string_view path);

class SafetensorsFile {
 public:
  // Maps and validates `path`. Errors name the file and, where one is involved, the tensor.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return mapping_->path(); }
  std::span<const TensorInfo> tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

  // nullptr if the file holds no tensor `name`.
  const TensorInfo* Find(std::string_view name) const;

  // The tensor's raw bytes inside the mapping; `info` must come from this file.
  std::span<const uint8_t> Data(const TensorInfo& info) const {
    return mapping_->bytes().subspan(info.file_offset, info.byte_size);
  }

  // Keeps the bytes alive for views that outlive this object.
  const std::shared_ptr<const MappedFile>& mapping() const { return mapping_; }

 private:
  SafetensorsFile(std::shared_ptr<const MappedFile> mapping, SafetensorsHeader header)
      : mapping_(std::move(mapping)), header_(std::move(header)) {}

  std::shared_ptr<const MappedFile> mapping_;
  SafetensorsHeader header_;
};

// "[64, 128]" — shapes in error messages.
std::string ShapeToString(std::span<const int64_t> shape);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SAFETENSORS_H_
