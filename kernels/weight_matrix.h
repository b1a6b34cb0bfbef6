// A weight matrix as the kernels read it: nn.Linear's [out = rows, in = cols] layout, row-major,
// in the format it is kept in. 16-bit weights are widened to fp32 inside the kernels and every
// product is accumulated in fp32, so bf16/f16 weights give exactly the results of their fp32
// values while moving half the bytes; int8 is a lossy option (symmetric, one scale per row).
#ifndef TANDEM_KERNELS_WEIGHT_MATRIX_H_
#define TANDEM_KERNELS_WEIGHT_MATRIX_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kernels/half_float.h"

namespace tandem::kernels {

enum class WeightFormat : uint8_t {
  kF32,
  kBF16,
  kF16,
  kI8,  // w[r][c] = row_scales[r] · q[r][c], q in [-127, 127]
};

// "f32", "bf16", "f16", "int8": the spelling of --weight-dtype.
std::string_view WeightFormatName(WeightFormat format);
size_t WeightElementBytes(WeightFormat format);

struct WeightMatrix {
  WeightFormat format = WeightFormat::kF32;
  // rows × cols elements. Any alignment: 16-bit weights may sit at odd offsets of a checkpoint
  // mapping, so kernels read them with unaligned loads.
  const void* data = nullptr;
  const float* row_scales = nullptr;  // kI8 only: [rows]
  int64_t rows = 0;
  int64_t cols = 0;

  static WeightMatrix F32(const float* w, int64_t rows, int64_t cols) {
    return {WeightFormat::kF32, w, nullptr, rows, cols};
  }

  // The fp32 array of a kF32 matrix.
  const float* f32() const { return static_cast<const float*>(data); }
  const uint8_t* bytes_at(int64_t row) const {
    return static_cast<const uint8_t*>(data) +
           static_cast<size_t>(row * cols) * WeightElementBytes(format);
  }
  // Bytes a pass over the matrix reads (the scales included).
  size_t bytes() const;
  // Rows [r0, r1) as a matrix of their own (a view: no copy).
  WeightMatrix Rows(int64_t r0, int64_t r1) const;

  // The value of one element, exactly as the kernels see it (slow; for references and tests).
  float At(int64_t r, int64_t c) const;
};

// Rows [r0, r1) as fp32 into out[(r1 - r0) · cols] (exact for the float formats; the int8 values
// come out as scale · q, rounded once).
void DequantizeRows(const WeightMatrix& w, int64_t r0, int64_t r1, float* out);

// Converts fp32 weights into `format` (round to nearest even for the 16-bit formats). `out`
// receives rows · cols elements of the format; `row_scales` (kI8 only) receives rows scales,
// max|row| / 127 (a zero row gets scale 0 and zeros). Non-finite weights are the caller's to
// refuse first: they have no int8 value.
void ConvertWeights(const float* w, int64_t rows, int64_t cols, WeightFormat format, void* out,
                    float* row_scales);

inline float WeightMatrix::At(int64_t r, int64_t c) const {
  const uint8_t* p = bytes_at(r) + static_cast<size_t>(c) * WeightElementBytes(format);
  switch (format) {
    case WeightFormat::kF32: {
      float v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case WeightFormat::kBF16:
    case WeightFormat::kF16: {
      uint16_t bits;
      std::memcpy(&bits, p, sizeof(bits));
      return format == WeightFormat::kBF16 ? Bf16BitsToFloat(bits) : F16BitsToFloat(bits);
    }
    case WeightFormat::kI8:
      return row_scales[r] * static_cast<float>(static_cast<int8_t>(*p));
  }
  return 0.0f;
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_WEIGHT_MATRIX_H_
