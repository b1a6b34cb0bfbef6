#include "models/weight_store.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::models {
namespace {

using kernels::WeightFormat;
using kernels::WeightMatrix;

struct StorageName {
  WeightStorage storage;
  std::string_view name;
};
constexpr std::array<StorageName, 5> kStorageNames = {{
    {WeightStorage::kAuto, "auto"},
    {WeightStorage::kF32, "f32"},
    {WeightStorage::kBF16, "bf16"},
    {WeightStorage::kF16, "f16"},
    {WeightStorage::kInt8, "int8"},
}};

// `shape` cut to `slice`. The loaders make the slices, so one that does not fit is our bug.
absl::StatusOr<std::vector<int64_t>> SlicedShapeOf(const std::string& name,
                                                   const std::vector<int64_t>& shape,
                                                   const TensorSlice& slice) {
  absl::StatusOr<std::vector<int64_t>> sliced = SlicedShape(shape, slice);
  if (!sliced.ok()) {
    return absl::InternalError(absl::StrCat("tensor \"", name, "\": ", sliced.status().message()));
  }
  return sliced;
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

}  // namespace

absl::StatusOr<WeightStorage> ParseWeightStorage(std::string_view name) {
  for (const StorageName& s : kStorageNames) {
    if (s.name == name) return s.storage;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight dtype \"", std::string(name.substr(0, 32)),
                   "\" (expected auto, f32, bf16, f16 or int8)"));
}

std::string_view WeightStorageName(WeightStorage storage) {
  for (const StorageName& s : kStorageNames) {
    if (s.storage == storage) return s.name;
  }
  return "?";
}

absl::StatusOr<FloatTensor> WeightStore::LoadFloat(const std::string& name,
                                                   const std::vector<int64_t>& shape,
                                                   const TensorSlice& slice) const {
  absl::StatusOr<FloatTensor> t = source_.LoadFloat(name, shape);
  if (!t.ok() || slice.whole()) return t;
  absl::StatusOr<std::vector<int64_t>> sliced = SlicedShapeOf(name, shape, slice);
  if (!sliced.ok()) return sliced.status();
  const int64_t count = Elements(*sliced);
  std::vector<float> kept(static_cast<size_t>(count));
  CopySlice(reinterpret_cast<const uint8_t*>(t->data().data()), shape, sizeof(float), slice,
            reinterpret_cast<uint8_t*>(kept.data()));
  return FloatTensor(*std::move(sliced), std::move(kept));
}

absl::StatusOr<RawTensor> WeightStore::LoadRaw(const std::string& name,
                                               const std::vector<int64_t>& shape,
                                               const TensorSlice& slice) {
  absl::StatusOr<RawTensor> raw = source_.LoadRaw(name, shape);
  if (!raw.ok() || slice.whole()) return raw;
  absl::StatusOr<std::vector<int64_t>> sliced = SlicedShapeOf(name, shape, slice);
  if (!sliced.ok()) return sliced.status();
  const int64_t count = Elements(*sliced);
  const size_t element = DTypeSize(raw->dtype);
  std::vector<uint8_t> kept(static_cast<size_t>(count) * element);
  CopySlice(raw->bytes.data(), shape, element, slice, kept.data());
  owned_bytes_.push_back(std::move(kept));
  RawTensor out;
  out.dtype = raw->dtype;
  out.shape = *std::move(sliced);
  out.bytes = owned_bytes_.back();
  return out;
}

absl::StatusOr<const float*> WeightStore::Get(const std::string& name,
                                              std::initializer_list<int64_t> shape,
                                              const TensorSlice& slice) {
  absl::StatusOr<FloatTensor> t = LoadFloat(name, std::vector<int64_t>(shape), slice);
  if (!t.ok()) return t.status();
  bytes_ += t->num_elements() * sizeof(float);
  parameters_ += t->num_elements();
  tensors_.push_back(*std::move(t));
  return Placed(tensors_.back().data().data(), tensors_.back().data().size());
}

absl::StatusOr<const float*> WeightStore::Placed(const float* host, size_t floats) {
  if (placer_ == nullptr) return host;
  absl::StatusOr<const void*> placed = placer_->Place(host, floats * sizeof(float));
  ReleaseHostCopies();
  if (!placed.ok()) return placed.status();
  return static_cast<const float*>(*placed);
}

absl::StatusOr<WeightMatrix> WeightStore::Placed(const WeightMatrix& host) {
  if (placer_ == nullptr) return host;
  WeightMatrix placed = host;
  const size_t data_bytes =
      static_cast<size_t>(host.rows * host.cols) * kernels::WeightElementBytes(host.format);
  absl::StatusOr<const void*> data = placer_->Place(host.data, data_bytes);
  absl::StatusOr<const void*> scales = nullptr;
  if (data.ok() && host.row_scales != nullptr) {
    scales = placer_->Place(host.row_scales, static_cast<size_t>(host.rows) * sizeof(float));
  }
  ReleaseHostCopies();
  if (!data.ok()) return data.status();
  if (!scales.ok()) return scales.status();
  placed.data = *data;
  if (host.row_scales != nullptr) placed.row_scales = static_cast<const float*>(*scales);
  return placed;
}

void WeightStore::ReleaseHostCopies() {
  if (placer_ == nullptr) return;
  tensors_.clear();
  raw_.clear();
  owned_.clear();
  owned_bytes_.clear();
}

size_t WeightStore::host_bytes_held() const {
  size_t held = 0;
  for (const FloatTensor& t : tensors_) {
    if (!t.borrowed()) held += t.data().size_bytes();
  }
  for (const std::vector<float>& v : owned_) held += v.size() * sizeof(float);
  for (const std::vector<uint8_t>& v : owned_bytes_) held += v.size();
  return held;
}

WeightFormat WeightStore::FormatFor(WeightStorage storage, DType stored) {
  switch (storage) {
    case WeightStorage::kAuto:
      return stored == DType::kBF16  ? WeightFormat::kBF16
             : stored == DType::kF16 ? WeightFormat::kF16
                                     : WeightFormat::kF32;
    case WeightStorage::kF32:
      return WeightFormat::kF32;
    case WeightStorage::kBF16:
      return WeightFormat::kBF16;
    case WeightStorage::kF16:
      return WeightFormat::kF16;
    case WeightStorage::kInt8:
      return WeightFormat::kI8;
  }
  return WeightFormat::kF32;
}

absl::StatusOr<WeightMatrix> WeightStore::Matrix(const std::string& name, int64_t rows,
                                                 int64_t cols, const TensorSlice& slice) {
  absl::StatusOr<WeightMatrix> m = MatrixIn(storage_, name, {rows, cols}, slice);
  if (!m.ok()) return m.status();
  return Placed(*m);
}

absl::StatusOr<WeightMatrix> WeightStore::ExactMatrix(const std::string& name, int64_t rows,
                                                      int64_t cols, const TensorSlice& slice) {
  absl::StatusOr<WeightMatrix> m = MatrixIn(WeightStorage::kAuto, name, {rows, cols}, slice);
  if (!m.ok()) return m.status();
  return Placed(*m);
}

absl::StatusOr<std::vector<WeightMatrix>> WeightStore::Matrices(const std::string& name,
                                                                int64_t count, int64_t rows,
                                                                int64_t cols,
                                                                const TensorSlice& slice) {
  absl::StatusOr<WeightMatrix> stacked = MatrixIn(storage_, name, {count, rows, cols}, slice);
  if (!slice.whole() && slice.dim == 1) rows = slice.kept();
  if (!slice.whole() && slice.dim == 2) cols = slice.kept();
  if (!stacked.ok()) return stacked.status();
  absl::StatusOr<WeightMatrix> placed = Placed(*stacked);
  if (!placed.ok()) return placed.status();
  const size_t matrix_bytes =
      static_cast<size_t>(rows * cols) * kernels::WeightElementBytes(placed->format);
  std::vector<WeightMatrix> views;
  views.reserve(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) {
    WeightMatrix view = *placed;
    view.data = static_cast<const uint8_t*>(placed->data) + e * matrix_bytes;
    if (placed->row_scales != nullptr) view.row_scales = placed->row_scales + e * rows;
    view.rows = rows;
    views.push_back(view);
  }
  return views;
}

absl::StatusOr<WeightMatrix> WeightStore::Embedding(const std::string& name, int64_t rows,
                                                    int64_t cols) {
  absl::StatusOr<WeightMatrix> m =
      MatrixIn(storage_ == WeightStorage::kInt8 ? WeightStorage::kAuto : storage_, name,
               {rows, cols}, TensorSlice{});
  if (!m.ok()) return m.status();
  return Placed(*m);
}

absl::StatusOr<WeightMatrix> WeightStore::MatrixIn(WeightStorage storage, const std::string& name,
                                                   const std::vector<int64_t>& full_shape,
                                                   const TensorSlice& slice) {
  absl::StatusOr<DType> stored = source_.StoredDType(name);
  if (!stored.ok()) return stored.status();
  absl::StatusOr<std::vector<int64_t>> sliced = SlicedShapeOf(name, full_shape, slice);
  if (!sliced.ok()) return sliced.status();
  const std::vector<int64_t>& shape = *sliced;
  const WeightFormat format = FormatFor(storage, *stored);
  const int64_t cols = shape.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  if (format == WeightFormat::kF32) {
    absl::StatusOr<FloatTensor> t = LoadFloat(name, full_shape, slice);
    if (!t.ok()) return t.status();
    bytes_ += t->num_elements() * sizeof(float);
    parameters_ += t->num_elements();
    tensors_.push_back(*std::move(t));
    return WeightMatrix::F32(tensors_.back().data().data(), rows, cols);
  }
  const bool same_16bit = (format == WeightFormat::kBF16 && *stored == DType::kBF16) ||
                          (format == WeightFormat::kF16 && *stored == DType::kF16);
  if (same_16bit) {
    // Kept as stored, in the file mapping: no copy, and the page cache holds it only once.
    absl::StatusOr<RawTensor> raw = LoadRaw(name, full_shape, slice);
    if (!raw.ok()) return raw.status();
    raw_.push_back(*std::move(raw));
    const WeightMatrix m{format, raw_.back().bytes.data(), nullptr, rows, cols};
    bytes_ += m.bytes();
    parameters_ += rows * cols;
    return m;
  }
  absl::StatusOr<FloatTensor> t = LoadFloat(name, full_shape, slice);
  if (!t.ok()) return t.status();
  return Own(absl::StrCat("tensor \"", name, "\""), std::move(*t).TakeVector(), rows, cols, format);
}

absl::StatusOr<WeightMatrix> WeightStore::Own(const std::string& what, std::vector<float> values,
                                              int64_t rows, int64_t cols, WeightFormat format) {
  if (format == WeightFormat::kF32) {
    owned_.push_back(std::move(values));
    bytes_ += owned_.back().size() * sizeof(float);
    parameters_ += rows * cols;
    return WeightMatrix::F32(owned_.back().data(), rows, cols);
  }
  if (format == WeightFormat::kI8) {
    // A non-finite weight has no int8 value (and would turn its row's scale into inf or NaN).
    const auto bad = std::find_if(values.begin(), values.end(),
                                  [](float v) { return !std::isfinite(v); });
    if (bad != values.end()) {
      const int64_t at = bad - values.begin();
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": element [", at / cols, ", ", at % cols, "] is ", *bad,
          "; int8 weights need finite values (load with --weight-dtype auto, f32 or bf16)"));
    }
  }
  std::vector<uint8_t> data(static_cast<size_t>(rows * cols) * kernels::WeightElementBytes(format));
  float* scales = nullptr;
  if (format == WeightFormat::kI8) {
    owned_.emplace_back(static_cast<size_t>(rows));
    scales = owned_.back().data();
  }
  kernels::ConvertWeights(values.data(), rows, cols, format, data.data(), scales);
  owned_bytes_.push_back(std::move(data));
  const WeightMatrix m{format, owned_bytes_.back().data(), scales, rows, cols};
  bytes_ += m.bytes();
  parameters_ += rows * cols;
  return m;
}

absl::StatusOr<WeightMatrix> WeightStore::SecondCopy(const std::string& name, int64_t rows,
                                                     int64_t cols) {
  const size_t parameters = parameters_;
  absl::StatusOr<WeightMatrix> copy = Matrix(name, rows, cols);
  parameters_ = parameters;
  return copy;
}

absl::StatusOr<WeightMatrix> WeightStore::Stack(const std::vector<Part>& parts, int64_t cols) {
  // Parts cut along their columns must agree on the width kept.
  int64_t rows = 0, kept_cols = cols;
  for (const Part& p : parts) {
    const bool by_rows = p.slice.whole() || p.slice.dim == 0;
    rows += by_rows && !p.slice.whole() ? p.slice.kept() : p.rows;
    if (!by_rows) kept_cols = p.slice.kept();
  }
  std::vector<float> out(static_cast<size_t>(rows * kept_cols));
  size_t at = 0;
  std::vector<DType> stored;
  for (const Part& p : parts) {
    absl::StatusOr<DType> dtype = source_.StoredDType(p.name);
    if (!dtype.ok()) return dtype.status();
    stored.push_back(*dtype);
    absl::StatusOr<FloatTensor> t = LoadFloat(p.name, std::vector<int64_t>{p.rows, cols}, p.slice);
    if (!t.ok()) return t.status();
    if (t->dim(1) != kept_cols || at + t->data().size() > out.size()) {
      return absl::InternalError(
          absl::StrCat("stack of \"", p.name, "\": parts kept different widths"));
    }
    std::copy(t->data().begin(), t->data().end(), out.begin() + static_cast<ptrdiff_t>(at));
    at += t->data().size();
  }
  const int64_t stack_cols = kept_cols;
  // Mixed stored formats (unusual) stack in fp32 under kAuto: nothing is rounded.
  const bool uniform = std::all_of(stored.begin(), stored.end(),
                                   [&](DType d) { return d == stored.front(); });
  const WeightFormat format =
      FormatFor(storage_, uniform && !stored.empty() ? stored.front() : DType::kF32);
  // Widened 16-bit values convert back exactly, so a kAuto stack of bf16 parts is their bytes.
  absl::StatusOr<WeightMatrix> stack =
      Own(absl::StrCat("stack of \"", parts.empty() ? std::string() : parts.front().name, "\" and ",
                       parts.size() - 1, " more"),
          std::move(out), rows, stack_cols, format);
  if (!stack.ok()) return stack.status();
  return Placed(*stack);
}

absl::StatusOr<const float*> WeightStore::Map(const std::string& name,
                                              std::initializer_list<int64_t> shape,
                                              const std::function<float(float)>& fn,
                                              const TensorSlice& slice) {
  absl::StatusOr<FloatTensor> t = LoadFloat(name, std::vector<int64_t>(shape), slice);
  if (!t.ok()) return t.status();
  std::vector<float> out(t->data().begin(), t->data().end());
  for (float& v : out) v = fn(v);
  bytes_ += out.size() * sizeof(float);
  parameters_ += out.size();
  owned_.push_back(std::move(out));
  return Placed(owned_.back().data(), owned_.back().size());
}

}  // namespace tandem::models
