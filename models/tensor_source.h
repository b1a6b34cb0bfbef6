// Where a model's weights come from: a checkpoint directory, or seeded random values of the
// right shapes (for benchmarks of model sizes we have no checkpoint for). The layer graph asks
// for tensors by name and shape and does not know which.
#ifndef TANDEM_MODELS_TENSOR_SOURCE_H_
#define TANDEM_MODELS_TENSOR_SOURCE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/checkpoint.h"

namespace tandem::models {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool Has(std::string_view name) const = 0;
  virtual absl::StatusOr<FloatTensor> LoadFloat(std::string_view name,
                                                std::span<const int64_t> shape) const = 0;
  // The element type `name` is stored in, so that weights can be kept in it.
  virtual absl::StatusOr<DType> StoredDType(std::string_view name) const = 0;
  // The bytes as stored (a source whose StoredDType is always F32 may refuse).
  virtual absl::StatusOr<RawTensor> LoadRaw(std::string_view name,
                                            std::span<const int64_t> shape) const = 0;
  // Tensors that exist but were never loaded (sorted).
  virtual std::vector<std::string> UnusedTensors() const = 0;
};

class CheckpointTensorSource final : public TensorSource {
 public:
  explicit CheckpointTensorSource(std::unique_ptr<Checkpoint> checkpoint)
      : checkpoint_(std::move(checkpoint)) {}
  bool Has(std::string_view name) const override { return checkpoint_->Has(name); }
  absl::StatusOr<FloatTensor> LoadFloat(std::string_view name,
                                        std::span<const int64_t> shape) const override {
    return checkpoint_->LoadFloat(name, shape);
  }
  absl::StatusOr<DType> StoredDType(std::string_view name) const override;
  absl::StatusOr<RawTensor> LoadRaw(std::string_view name,
                                    std::span<const int64_t> shape) const override {
    return checkpoint_->LoadRaw(name, shape);
  }
  std::vector<std::string> UnusedTensors() const override { return checkpoint_->UnusedTensors(); }

 private:
  std::unique_ptr<Checkpoint> checkpoint_;
};

// Every name exists; values are uniform in ±1/sqrt(fan-in) for matrices, with the 1-D tensors
// set so the model stays numerically tame: norm weights 1, D 1, A_log in log[1, 16], dt biases
// giving dt ≈ 0.01-0.1. Deterministic in `seed` and the tensor name.
class RandomTensorSource final : public TensorSource {
 public:
  explicit RandomTensorSource(uint64_t seed) : seed_(seed) {}
  bool Has(std::string_view name) const override { return true; }
  absl::StatusOr<FloatTensor> LoadFloat(std::string_view name,
                                        std::span<const int64_t> shape) const override;
  // Random weights are generated in fp32; other formats are converted from them.
  absl::StatusOr<DType> StoredDType(std::string_view) const override { return DType::kF32; }
  absl::StatusOr<RawTensor> LoadRaw(std::string_view name,
                                    std::span<const int64_t> shape) const override;
  std::vector<std::string> UnusedTensors() const override { return {}; }

 private:
  uint64_t seed_;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_TENSOR_SOURCE_H_
