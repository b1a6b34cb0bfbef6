#include "kernels/weight_matrix.h"

#include <algorithm>
#include <cmath>

namespace tandem::kernels {

std::string_view WeightFormatName(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kI8:
      return "int8";
  }
  return "?";
}

size_t WeightElementBytes(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return 4;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      return 2;
    case WeightFormat::kI8:
      return 1;
  }
  return 4;
}

size_t WeightMatrix::bytes() const {
  const size_t elements = static_cast<size_t>(rows * cols) * WeightElementBytes(format);
  return elements + (format == WeightFormat::kI8 ? static_cast<size_t>(rows) * sizeof(float) : 0);
}

WeightMatrix WeightMatrix::Rows(int64_t r0, int64_t r1) const {
  WeightMatrix view = *this;
  view.data = bytes_at(r0);
  if (row_scales != nullptr) view.row_scales = row_scales + r0;
  view.rows = r1 - r0;
  return view;
}

void DequantizeRows(const WeightMatrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t k = w.cols;
  if (k <= 0 || r1 <= r0) return;  // nothing to read (and memcpy must not see null pointers)
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* src = w.bytes_at(r);
    float* dst = out + (r - r0) * k;
    switch (w.format) {
      case WeightFormat::kF32:
        std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
        break;
      case WeightFormat::kBF16:
        for (int64_t c = 0; c < k; ++c) {
          uint16_t bits;
          std::memcpy(&bits, src + 2 * c, sizeof(bits));
          dst[c] = Bf16BitsToFloat(bits);
        }
        break;
      case WeightFormat::kF16:
        for (int64_t c = 0; c < k; ++c) {
          uint16_t bits;
          std::memcpy(&bits, src + 2 * c, sizeof(bits));
          dst[c] = F16BitsToFloat(bits);
        }
        break;
      case WeightFormat::kI8: {
        const float scale = w.row_scales[r];
        const int8_t* q = reinterpret_cast<const int8_t*>(src);
        for (int64_t c = 0; c < k; ++c) dst[c] = scale * static_cast<float>(q[c]);
        break;
      }
    }
  }
}

void ConvertWeights(const float* w, int64_t rows, int64_t cols, WeightFormat format, void* out,
                    float* row_scales) {
  const size_t n = static_cast<size_t>(rows * cols);
  if (n == 0) return;
  switch (format) {
    case WeightFormat::kF32:
      std::memcpy(out, w, n * sizeof(float));
      return;
    case WeightFormat::kBF16:
    case WeightFormat::kF16: {
      uint8_t* dst = static_cast<uint8_t*>(out);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t bits =
            format == WeightFormat::kBF16 ? FloatToBf16Bits(w[i]) : FloatToF16Bits(w[i]);
        std::memcpy(dst + 2 * i, &bits, sizeof(bits));
      }
      return;
    }
    case WeightFormat::kI8: {
      int8_t* q = static_cast<int8_t*>(out);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = w + r * cols;
        float max_abs = 0.0f;
        for (int64_t c = 0; c < cols; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
        const float scale = max_abs / 127.0f;
        row_scales[r] = scale;
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
          const float v = std::nearbyint(row[c] * inv);
          q[r * cols + c] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
        }
      }
      return;
    }
  }
}

}  // namespace tandem::kernels
