// Element types that appear in checkpoint headers, and exact conversion of the 16-bit float
// formats to fp32.
#ifndef TANDEM_MODELS_DTYPE_H_
#define TANDEM_MODELS_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem::models {

// Every dtype the safetensors format defines, so that an unsupported one can be named in an
// error instead of being reported as garbage. Only kF32, kF16 and kBF16 convert to float.
enum class DType {
  kF64,
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
  kF8E4M3,
  kF8E5M2,
};

// Parses a safetensors dtype string ("F32", "BF16", "F8_E4M3", ...). Case-sensitive, as in the
// format. InvalidArgument naming the string if unknown.
absl::StatusOr<DType> ParseDType(std::string_view name);

// The safetensors spelling of `dtype` ("BF16").
std::string_view DTypeName(DType dtype);

// Bytes per element.
size_t DTypeSize(DType dtype);

// True for the types LoadFloat can produce fp32 from (F32, F16, BF16).
bool IsFloatConvertible(DType dtype);

// Exact scalar conversions (every 16-bit value, including subnormals, ±inf and NaN payloads,
// maps to the fp32 value with the same meaning).
inline float Bf16ToF32(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}
float F16ToF32(uint16_t bits);

// fp32 -> bf16 with round-to-nearest-even (what torch's .to(bfloat16) does); NaN stays NaN.
uint16_t F32ToBf16(float value);

// Bulk conversions of `count` little-endian 16-bit values at `src` into `dst`. `src` needs no
// alignment (checkpoint data sits at arbitrary byte offsets); the loops vectorise.
void Bf16ToF32(const void* src, float* dst, size_t count);
void F16ToF32(const void* src, float* dst, size_t count);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_DTYPE_H_
