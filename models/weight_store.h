// Holds a model's weights as fp32 arrays for the lifetime of the model: tensors borrowed from the
// checkpoint's file mapping (fp32 checkpoints, zero copy) or converted / fused into owned memory.
#ifndef TANDEM_MODELS_WEIGHT_STORE_H_
#define TANDEM_MODELS_WEIGHT_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/tensor_source.h"

namespace tandem::models {

class WeightStore {
 public:
  explicit WeightStore(const TensorSource& source) : source_(source) {}

  bool Has(const std::string& name) const { return source_.Has(name); }

  // The tensor `name` with exactly `shape`; errors name the file and tensor.
  absl::StatusOr<const float*> Get(const std::string& name, std::initializer_list<int64_t> shape);

  // Tensors stacked along their first dimension into one owned array, so that several linear
  // layers reading the same input run as one GEMM (e.g. q ‖ k ‖ v, gate ‖ up). Each part is
  // [rows_i, cols] with the same cols.
  struct Part {
    std::string name;
    int64_t rows;
  };
  absl::StatusOr<const float*> Stack(const std::vector<Part>& parts, int64_t cols);

  // The tensor transformed element-wise into owned memory (e.g. A = -exp(A_log)).
  absl::StatusOr<const float*> Map(const std::string& name, std::initializer_list<int64_t> shape,
                                   const std::function<float(float)>& fn);

  // Bytes of weights held (borrowed or owned), for the bandwidth figures of the benchmarks.
  size_t bytes() const { return bytes_; }

 private:
  const TensorSource& source_;
  std::deque<FloatTensor> tensors_;
  std::deque<std::vector<float>> owned_;
  size_t bytes_ = 0;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_WEIGHT_STORE_H_
