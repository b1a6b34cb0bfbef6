// A checkpoint directory: config.json plus either model.safetensors or the shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard_file}}).
// Everything is mapped and validated at Open; loading a tensor only converts it.
#ifndef TANDEM_MODELS_CHECKPOINT_H_
#define TANDEM_MODELS_CHECKPOINT_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/dtype.h"
#include "models/safetensors.h"

namespace tandem::models {

// A contiguous row-major fp32 array and its shape. Either owns its floats or borrows them from
// a file mapping it keeps alive; either way it is cheap to move and safe to outlive the
// Checkpoint it came from.
class FloatTensor {
 public:
  FloatTensor() = default;
  // Owns `data`; data.size() must equal the product of `shape`.
  FloatTensor(std::vector<int64_t> shape, std::vector<float> data);
  // Borrows `data` (product-of-shape floats), which stays valid while `keep_alive` lives.
  FloatTensor(std::vector<int64_t> shape, const float* data,
              std::shared_ptr<const void> keep_alive);

  // Moving leaves the source empty.
  FloatTensor(FloatTensor&& other) noexcept;
  FloatTensor& operator=(FloatTensor&& other) noexcept;
  FloatTensor(const FloatTensor&) = delete;
  FloatTensor& operator=(const FloatTensor&) = delete;

  std::span<const float> data() const { return {data_, static_cast<size_t>(num_elements_)}; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t num_elements() const { return num_elements_; }
  // True when the floats live in the file mapping (zero copy).
  bool borrowed() const { return keep_alive_ != nullptr; }
  // The floats as an owned, mutable vector (moved out when owned, copied when borrowed);
  // leaves this tensor empty.
  std::vector<float> TakeVector() &&;

 private:
  std::vector<int64_t> shape_;
  int64_t num_elements_ = 0;
  const float* data_ = nullptr;
  std::vector<float> owned_;
  std::shared_ptr<const void> keep_alive_;
};

// A tensor's raw bytes as stored (e.g. bf16 for a GPU upload without conversion).
struct RawTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;                // little-endian, row-major; any alignment
  std::shared_ptr<const MappedFile> keep_alive;  // owns `bytes`
};

// Const methods may be called from several threads at once (loaders may run in parallel).
class Checkpoint {
 public:
  // Opens `dir`. Errors name the path at fault: a missing directory or config.json, no
  // weights, an invalid index (bad JSON, a weight_map entry that is not a file name), a
  // missing or corrupt shard, a tensor the index places in a shard that lacks it.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string config_path() const;
  // The safetensors files in use (one, or the shards in name order).
  std::vector<std::string> files() const;

  bool Has(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> TensorNames() const;
  // Header information of `name` (dtype, shape, sizes); NotFound naming the tensor and dir.
  absl::StatusOr<TensorInfo> Info(std::string_view name) const;

  // `name` as fp32 with exactly `expected_shape`. F32 data is used in place when 4-byte
  // aligned (otherwise copied); BF16/F16 are converted into owned memory. Errors name the
  // file and tensor: missing (NotFound), shape mismatch ("expected [64, 128], found
  // [64, 127]"), dtype not convertible to float.
  absl::StatusOr<FloatTensor> LoadFloat(std::string_view name,
                                        std::span<const int64_t> expected_shape) const;
  absl::StatusOr<FloatTensor> LoadFloat(std::string_view name,
                                        std::initializer_list<int64_t> expected_shape) const {
    return LoadFloat(name, std::span<const int64_t>(expected_shape.begin(), expected_shape.size()));
  }
  // As LoadFloat, accepting whatever shape the file holds.
  absl::StatusOr<FloatTensor> LoadFloatAnyShape(std::string_view name) const;

  // The bytes as stored, with the same lookup and shape check as LoadFloat.
  absl::StatusOr<RawTensor> LoadRaw(std::string_view name,
                                    std::span<const int64_t> expected_shape) const;
  absl::StatusOr<RawTensor> LoadRaw(std::string_view name,
                                    std::initializer_list<int64_t> expected_shape) const {
    return LoadRaw(name, std::span<const int64_t>(expected_shape.begin(), expected_shape.size()));
  }

  // Names of tensors never passed to LoadFloat/LoadFloatAnyShape/LoadRaw (sorted), so a model
  // loader can reject or warn about weights it does not understand.
  std::vector<std::string> UnusedTensors() const;
  // FailedPrecondition listing (up to a few of) the unused tensors, or OK if all were loaded.
  absl::Status CheckAllUsed() const;

 private:
  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };

  Checkpoint() = default;
  absl::StatusOr<Entry> Find(std::string_view name) const;
  absl::StatusOr<Entry> FindChecked(std::string_view name,
                                    std::span<const int64_t> expected_shape) const;
  void MarkUsed(std::string_view name) const;

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> tensors_;

  mutable std::mutex used_mu_;
  mutable std::set<std::string, std::less<>> used_;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_CHECKPOINT_H_
