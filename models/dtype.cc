#include "models/dtype.h"

#include <array>
#include <bit>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/half_float.h"

namespace tandem::models {
namespace {

// Abseil here is built with its own string_view type; bridge from std::string_view.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

static_assert(std::endian::native == std::endian::little,
              "checkpoint data is little-endian; big-endian hosts are not supported");

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeEntry, 15> kDTypes = {{
    {DType::kF64, "F64", 8},
    {DType::kF32, "F32", 4},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},
    {DType::kI8, "I8", 1},
    {DType::kU64, "U64", 8},
    {DType::kU32, "U32", 4},
    {DType::kU16, "U16", 2},
    {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
    {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kF8E5M2, "F8_E5M2", 1},
}};

const DTypeEntry& Entry(DType dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == dtype) return e;
  }
  return kDTypes[1];  // unreachable for valid enum values
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}


}  // namespace

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.name == name) return e.dtype;
  }
  // The name comes from an untrusted header: bound what lands in the message.
  std::string shown(name.substr(0, 32));
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown dtype \"%s\"%s", absl::CHexEscape(shown), name.size() > 32 ? "..." : ""));
}

std::string_view DTypeName(DType dtype) { return Entry(dtype).name; }

size_t DTypeSize(DType dtype) { return Entry(dtype).size; }

bool IsFloatConvertible(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

float F16ToF32(uint16_t bits) { return kernels::F16BitsToFloat(bits); }

uint16_t F32ToBf16(float value) { return kernels::FloatToBf16Bits(value); }

void Bf16ToF32(const void* src, float* dst, size_t count) {
  const uint8_t* in = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < count; ++i) {
    dst[i] = std::bit_cast<float>(static_cast<uint32_t>(LoadU16(in + 2 * i)) << 16);
  }
}

void F16ToF32(const void* src, float* dst, size_t count) {
  const uint8_t* in = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < count; ++i) {
    dst[i] = std::bit_cast<float>(kernels::F16BitsToF32Bits(LoadU16(in + 2 * i)));
  }
}

}  // namespace tandem::models
