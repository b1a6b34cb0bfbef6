// Exact scalar conversions between fp32 and the two 16-bit float formats weights are stored in.
// Both directions round to nearest even, as torch's .to(dtype) does; widening is exact for every
// 16-bit value (subnormals, ±inf, NaN payloads). Little-endian bit patterns.
#ifndef TANDEM_KERNELS_HALF_FLOAT_H_
#define TANDEM_KERNELS_HALF_FLOAT_H_

#include <bit>
#include <cmath>
#include <cstdint>

namespace tandem::kernels {

inline float Bf16BitsToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Branch-free (masks, not ternaries, which GCC turns into jumps) so that bulk loops vectorise:
// every case is computed and one is selected.
inline uint32_t F16BitsToF32Bits(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;  // exponent and mantissa
  // Normal numbers: move the fields into place and rebias the exponent (15 -> 127).
  uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Inf / NaN (exponent all ones): the rebias must land on exponent 255, keeping the payload.
  const uint32_t inf_nan_mask = 0u - static_cast<uint32_t>(magnitude >= 0x7c00u);
  normal += inf_nan_mask & ((128u - 16u) << 23);
  // Zero and subnormals: the value is mantissa * 2^-24, exact in fp32.
  const float sub = static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f;
  const uint32_t sub_mask = 0u - static_cast<uint32_t>(magnitude < 0x0400u);
  return sign | (std::bit_cast<uint32_t>(sub) & sub_mask) | (normal & ~sub_mask);
}

inline float F16BitsToFloat(uint16_t bits) { return std::bit_cast<float>(F16BitsToF32Bits(bits)); }

inline uint16_t FloatToBf16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep sign and the top of the payload, force the quiet bit so it cannot become inf.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline uint16_t FloatToF16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: quiet, top of the payload kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x03ffu));
  }
  // From 65520 (halfway between 65504, the largest finite half, and 2^16) up: infinity.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the half is subnormal, mantissa = value · 2^24 rounded to an integer: the
    // scaling is exact and nearbyint rounds to nearest even in the default rounding mode. 1024
    // (rounding up to the smallest normal) encodes correctly as it is.
    const float scaled = std::bit_cast<float>(magnitude) * 0x1p24f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits; a carry
  // out of the mantissa correctly bumps the exponent.
  uint32_t rebiased = magnitude - ((127u - 15u) << 23);
  rebiased += 0x0fffu + ((rebiased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rebiased >> 13));
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_HALF_FLOAT_H_
