#include "models/weight_store.h"

#include <algorithm>

namespace tandem::models {

absl::StatusOr<const float*> WeightStore::Get(const std::string& name,
                                              std::initializer_list<int64_t> shape) {
  absl::StatusOr<FloatTensor> t = source_.LoadFloat(name, std::vector<int64_t>(shape));
  if (!t.ok()) return t.status();
  bytes_ += t->num_elements() * sizeof(float);
  tensors_.push_back(*std::move(t));
  return tensors_.back().data().data();
}

absl::StatusOr<const float*> WeightStore::Stack(const std::vector<Part>& parts, int64_t cols) {
  int64_t rows = 0;
  for (const Part& p : parts) rows += p.rows;
  std::vector<float> out(static_cast<size_t>(rows * cols));
  int64_t row = 0;
  for (const Part& p : parts) {
    absl::StatusOr<FloatTensor> t = source_.LoadFloat(p.name, std::vector<int64_t>{p.rows, cols});
    if (!t.ok()) return t.status();
    std::copy(t->data().begin(), t->data().end(), out.begin() + row * cols);
    row += p.rows;
  }
  bytes_ += out.size() * sizeof(float);
  owned_.push_back(std::move(out));
  return owned_.back().data();
}

absl::StatusOr<const float*> WeightStore::Map(const std::string& name,
                                              std::initializer_list<int64_t> shape,
                                              const std::function<float(float)>& fn) {
  absl::StatusOr<FloatTensor> t = source_.LoadFloat(name, std::vector<int64_t>(shape));
  if (!t.ok()) return t.status();
  std::vector<float> out(t->data().begin(), t->data().end());
  for (float& v : out) v = fn(v);
  bytes_ += out.size() * sizeof(float);
  owned_.push_back(std::move(out));
  return owned_.back().data();
}

}  // namespace tandem::models
