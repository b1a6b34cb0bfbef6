#include "models/tensor_source.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::models {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

absl::StatusOr<FloatTensor> RandomTensorSource::LoadFloat(std::string_view name,
                                                          std::span<const int64_t> shape) const {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> data(static_cast<size_t>(count));
  uint64_t state = seed_;
  for (char c : name) state = Mix(state ^ static_cast<unsigned char>(c));
  auto uniform = [&]() {  // [0, 1)
    state = Mix(state);
    return static_cast<float>(state >> 40) * 0x1.0p-24f;
  };

  const bool matrix = shape.size() >= 2;
  if (EndsWith(name, "A_log")) {
    for (float& v : data) v = std::log(1.0f + 15.0f * uniform());
  } else if (EndsWith(name, "dt_bias") || EndsWith(name, "dt_proj.bias")) {
    for (float& v : data) v = std::log(std::expm1(0.01f + 0.09f * uniform()));
  } else if (!matrix && (EndsWith(name, "norm.weight") || EndsWith(name, ".D") ||
                         EndsWith(name, "layernorm.weight") || EndsWith(name, "norm_f.weight"))) {
    for (float& v : data) v = 1.0f;
  } else if (!matrix) {  // biases
    for (float& v : data) v = 0.02f * (2.0f * uniform() - 1.0f);
  } else {
    // A depthwise conv's [C, 1, K] reads K values per output; a stack of matrices
    // [count, rows, cols] (Granite's experts), cols.
    int64_t fan_in = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
    if (shape.size() == 3 && !EndsWith(name, "conv1d.weight")) fan_in = shape.back();
    // Embeddings are read one row at a time, not multiplied: keep their rows O(1).
    const float scale = EndsWith(name, "embed_tokens.weight") || EndsWith(name, "embeddings.weight")
                            ? 1.0f
                            : 1.0f / std::sqrt(static_cast<float>(fan_in));
    for (float& v : data) v = scale * (2.0f * uniform() - 1.0f);
  }
  return FloatTensor(std::vector<int64_t>(shape.begin(), shape.end()), std::move(data));
}

}  // namespace tandem::models

namespace tandem::models {

absl::StatusOr<DType> CheckpointTensorSource::StoredDType(std::string_view name) const {
  absl::StatusOr<TensorInfo> info = checkpoint_->Info(name);
  if (!info.ok()) return info.status();
  return info->dtype;
}

absl::StatusOr<RawTensor> RandomTensorSource::LoadRaw(std::string_view name,
                                                      std::span<const int64_t>) const {
  return absl::UnimplementedError(
      absl::StrCat("random weights have no stored bytes (tensor \"", std::string(name), "\")"));
}

}  // namespace tandem::models
