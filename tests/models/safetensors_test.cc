// Tests of models/mapped_file, models/dtype and models/safetensors.
#include "models/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/dtype.h"
#include "models/mapped_file.h"
#include "tests/models/safetensors_writer.h"

namespace tandem::models {
namespace {

using ::tandem::models::testing::F32Bytes;
using ::tandem::models::testing::RawSafetensors;
using ::tandem::models::testing::SafetensorsBytes;
using ::tandem::models::testing::TempDir;
using ::tandem::models::testing::TestTensor;
using ::tandem::models::testing::U16Bytes;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// ---- MappedFile ----------------------------------------------------------------------------

TEST(MappedFileTest, MapsContents) {
  TempDir dir;
  const std::string path = dir.Write("a.bin", "hello");
  absl::StatusOr<std::unique_ptr<MappedFile>> f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->size(), 5u);
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->data()), 5), "hello");
}

TEST(MappedFileTest, EmptyFileHasNoBytes) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<MappedFile>> f = MappedFile::Open(dir.Write("empty", ""));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->size(), 0u);
  EXPECT_TRUE((*f)->bytes().empty());
}

TEST(MappedFileTest, MissingFileIsNotFoundNamingPath) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<MappedFile>> f = MappedFile::Open(dir.File("nope.bin"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(f.status()), HasSubstr(dir.File("nope.bin")));
}

TEST(MappedFileTest, DirectoryIsAnErrorNamingPath) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<MappedFile>> f = MappedFile::Open(dir.path());
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(Msg(f.status()), AllOf(HasSubstr(dir.path()), HasSubstr("directory")));
}

TEST(MappedFileTest, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can read any file";
  TempDir dir;
  const std::string path = dir.Write("secret", "x");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  absl::StatusOr<std::unique_ptr<MappedFile>> f = MappedFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(Msg(f.status()), HasSubstr(path));
}

// ---- DType ---------------------------------------------------------------------------------

TEST(DTypeTest, ParsesEverySafetensorsName) {
  const std::vector<std::pair<std::string, size_t>> names = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (const auto& [name, size] : names) {
    absl::StatusOr<DType> d = ParseDType(name);
    ASSERT_TRUE(d.ok()) << name;
    EXPECT_EQ(DTypeName(*d), name);
    EXPECT_EQ(DTypeSize(*d), size) << name;
  }
  EXPECT_TRUE(IsFloatConvertible(DType::kF32));
  EXPECT_TRUE(IsFloatConvertible(DType::kF16));
  EXPECT_TRUE(IsFloatConvertible(DType::kBF16));
  EXPECT_FALSE(IsFloatConvertible(DType::kF64));
  EXPECT_FALSE(IsFloatConvertible(DType::kI32));
}

TEST(DTypeTest, UnknownNameIsNamedInError) {
  absl::StatusOr<DType> d = ParseDType("bf16");  // case matters
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(Msg(d.status()), HasSubstr("\"bf16\""));
  EXPECT_FALSE(ParseDType("").ok());
}

TEST(DTypeTest, Bf16KnownValues) {
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToF32(0xc000), -2.0f);
  EXPECT_EQ(Bf16ToF32(0x3ec0), 0.375f);
  EXPECT_EQ(Bf16ToF32(0x7f7f), std::bit_cast<float>(0x7f7f0000u));  // largest finite
  EXPECT_EQ(Bf16ToF32(0x0001), std::ldexp(1.0f, -133));             // smallest subnormal
  EXPECT_EQ(Bf16ToF32(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bf16ToF32(0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Bf16ToF32(0x7fc0)));
  EXPECT_TRUE(std::isnan(Bf16ToF32(0xffc1)));
  EXPECT_EQ(Bf16ToF32(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(Bf16ToF32(0x8000)));
}

TEST(DTypeTest, F16KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x3555), 0.333251953125f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);                  // largest finite
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(F16ToF32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7c01)));  // signalling NaN stays NaN, not inf
  EXPECT_TRUE(std::isnan(F16ToF32(0xfe00)));
  EXPECT_EQ(F16ToF32(0x0000), 0.0f);
  EXPECT_FALSE(std::signbit(F16ToF32(0x0000)));
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
}

// Reference decoding from the IEEE fields, written independently of the library's bit tricks.
float F16Reference(uint16_t h) {
  const int sign = h >> 15;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

TEST(DTypeTest, F16AllValuesExactScalarAndBulk) {
  // Bulk input starts at an odd address: checkpoint data need not be aligned.
  std::vector<uint8_t> raw(1 + 2 * 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    std::memcpy(raw.data() + 1 + 2 * i, &h, 2);
  }
  std::vector<float> bulk(65536);
  F16ToF32(raw.data() + 1, bulk.data(), bulk.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float want = F16Reference(h);
    const float got = F16ToF32(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << i;
      ASSERT_TRUE(std::isnan(bulk[i])) << std::hex << i;
      // The payload is carried over: top mantissa bits land in the fp32 mantissa.
      ASSERT_EQ(std::bit_cast<uint32_t>(got) & 0x007fe000u, (uint32_t{h} & 0x3ffu) << 13);
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << std::hex << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(bulk[i]), std::bit_cast<uint32_t>(want)) << std::hex << i;
    }
    ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << i;
  }
}

TEST(DTypeTest, Bf16AllValuesBulkMatchesScalarAndRoundTrips) {
  std::vector<uint8_t> raw(1 + 2 * 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    std::memcpy(raw.data() + 1 + 2 * i, &h, 2);
  }
  std::vector<float> bulk(65536);
  Bf16ToF32(raw.data() + 1, bulk.data(), bulk.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    ASSERT_EQ(std::bit_cast<uint32_t>(bulk[i]), uint32_t{h} << 16) << std::hex << i;
    if (!std::isnan(bulk[i])) {
      ASSERT_EQ(F32ToBf16(bulk[i]), h) << std::hex << i;
    }
  }
}

TEST(DTypeTest, F32ToBf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to the even (1.0).
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1.0078125 + 2^-8 is halfway up from an odd mantissa: rounds up to even.
  EXPECT_EQ(F32ToBf16(1.0078125f + std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(F32ToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  const uint16_t nan = F32ToBf16(std::bit_cast<float>(0x7f800001u));  // payload only in low bits
  EXPECT_TRUE(std::isnan(Bf16ToF32(nan)));
}

// ---- Safetensors: valid files --------------------------------------------------------------

std::vector<TestTensor> SampleTensors() {
  return {
      {"a.f32", "F32", {2, 3}, F32Bytes({1, 2, 3, 4, 5, 6})},
      {"b.bf16", "BF16", {2}, U16Bytes({0x3f80, 0xc000})},
      {"c.f16", "F16", {1, 1, 2}, U16Bytes({0x3c00, 0x0001})},
      {"d.scalar", "F32", {}, F32Bytes({7})},
      {"e.empty", "F32", {0, 4}, ""},
      {"f.i32", "I32", {1}, std::string("\x05\x00\x00\x00", 4)},
  };
}

TEST(SafetensorsTest, ParsesValidFile) {
  TempDir dir;
  const std::string path = dir.Write("m.safetensors", SafetensorsBytes(SampleTensors()));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->path(), path);
  ASSERT_EQ((*f)->tensors().size(), 6u);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");

  const TensorInfo* a = (*f)->Find("a.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->num_elements, 6);
  EXPECT_EQ(a->byte_size, 24u);
  std::span<const uint8_t> data = (*f)->Data(*a);
  float values[6];
  std::memcpy(values, data.data(), sizeof(values));
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[5], 6.0f);

  const TensorInfo* scalar = (*f)->Find("d.scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->num_elements, 1);
  const TensorInfo* empty = (*f)->Find("e.empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->num_elements, 0);
  EXPECT_EQ(empty->byte_size, 0u);
  EXPECT_EQ((*f)->Find("f.i32")->dtype, DType::kI32);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
  EXPECT_EQ((*f)->Find("a.f3"), nullptr);
}

TEST(SafetensorsTest, OffsetsAreRelativeToTheEndOfTheHeader) {
  const std::string header =
      R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[1,3]},"__metadata__":{"k":"v"}})";
  const std::string bytes = RawSafetensors(header, "\x01\x02\x03");
  absl::StatusOr<SafetensorsHeader> h = ParseSafetensors(AsBytes(bytes), "mem");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensors.size(), 1u);
  EXPECT_EQ(h->tensors[0].file_offset, 8 + header.size() + 1);
  EXPECT_EQ(bytes[h->tensors[0].file_offset], '\x02');
}

TEST(SafetensorsTest, EmptyHeaderObjectIsValid) {
  const std::string bytes = RawSafetensors("{}", "");
  absl::StatusOr<SafetensorsHeader> h = ParseSafetensors(AsBytes(bytes), "mem");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->tensors.empty());
}

TEST(SafetensorsTest, HeaderPaddedWithSpacesIsValid) {
  const std::string header = R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}     )";
  absl::StatusOr<SafetensorsHeader> h = ParseSafetensors(AsBytes(RawSafetensors(header, "z")), "m");
  EXPECT_TRUE(h.ok()) << h.status();
}

// ---- Safetensors: every error names the file and, where relevant, the tensor ---------------

struct BadHeaderCase {
  std::string label;
  std::string header;
  std::string data;
  std::string tensor;    // must appear in the message ("" = no tensor involved)
  std::string expected;  // a fragment of the message
};

class SafetensorsErrorTest : public ::testing::TestWithParam<BadHeaderCase> {};

TEST_P(SafetensorsErrorTest, RejectsWithPreciseMessage) {
  const BadHeaderCase& c = GetParam();
  TempDir dir;
  const std::string path =
      dir.Write("bad_" + c.label + ".safetensors", RawSafetensors(c.header, c.data));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok()) << c.label;
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(f.status()), HasSubstr(path));
  if (!c.tensor.empty()) {
    EXPECT_THAT(Msg(f.status()), HasSubstr("\"" + c.tensor + "\""));
  }
  EXPECT_THAT(Msg(f.status()), HasSubstr(c.expected));
}

std::string Entry(std::string_view name, std::string_view body) {
  return "{\"" + std::string(name) + "\":" + std::string(body) + "}";
}

INSTANTIATE_TEST_SUITE_P(
    AllErrors, SafetensorsErrorTest,
    ::testing::Values(
        BadHeaderCase{"invalid_json", R"({"w": {"dtype": "F32",)", "", "", "not valid JSON"},
        BadHeaderCase{"not_object", "[1, 2]", "", "", "not an object"},
        BadHeaderCase{"empty_header", "", "", "", "not valid JSON"},
        BadHeaderCase{"entry_not_object", Entry("w", "[1]"), "", "w", "not an object"},
        BadHeaderCase{"missing_dtype", Entry("w", R"({"shape":[1],"data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "missing \"dtype\""},
        BadHeaderCase{"missing_shape", Entry("w", R"({"dtype":"F32","data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "missing \"shape\""},
        BadHeaderCase{"missing_offsets", Entry("w", R"({"dtype":"F32","shape":[1]})"),
                      std::string(4, '\0'), "w", "missing \"data_offsets\""},
        BadHeaderCase{"dtype_not_string",
                      Entry("w", R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "\"dtype\" is not a string"},
        BadHeaderCase{"unknown_dtype",
                      Entry("w", R"({"dtype":"Q7","shape":[1],"data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "unknown dtype \"Q7\""},
        BadHeaderCase{"shape_not_array",
                      Entry("w", R"({"dtype":"F32","shape":3,"data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "\"shape\" is not an array"},
        BadHeaderCase{"negative_dim",
                      Entry("w", R"({"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "not a non-negative integer: -1"},
        BadHeaderCase{"float_dim",
                      Entry("w", R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "not a non-negative integer: 1.5"},
        BadHeaderCase{"huge_dim",
                      Entry("w", R"({"dtype":"F32","shape":[18446744073709551615],)"
                                 R"("data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "not a non-negative integer"},
        BadHeaderCase{"overflowing_shape",
                      Entry("w", R"({"dtype":"F32","shape":[4294967296,4294967296],)"
                                 R"("data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "overflows 64 bits"},
        BadHeaderCase{"overflowing_bytes",
                      Entry("w", R"({"dtype":"F64","shape":[2305843009213693952],)"
                                 R"("data_offsets":[0,4]})"),
                      std::string(4, '\0'), "w", "overflows 64 bits of bytes"},
        BadHeaderCase{"offsets_not_pair",
                      Entry("w", R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"),
                      std::string(4, '\0'), "w", "not a pair of non-negative integers"},
        BadHeaderCase{"negative_offset",
                      Entry("w", R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})"),
                      std::string(4, '\0'), "w", "not a pair of non-negative integers"},
        BadHeaderCase{"offsets_reversed",
                      Entry("w", R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})"),
                      std::string(4, '\0'), "w", "end before they begin"},
        BadHeaderCase{"size_mismatch",
                      Entry("w", R"({"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]})"),
                      std::string(12, '\0'), "w",
                      "data_offsets [0, 10] hold 10 bytes but shape [2, 3] of BF16 needs 12"},
        BadHeaderCase{"truncated_data",
                      Entry("w", R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"),
                      std::string(15, '\0'), "w", "truncated"},
        BadHeaderCase{"overlap",
                      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      std::string(12, '\0'), "b", "overlap those of tensor \"a\""},
        BadHeaderCase{"duplicate_name",
                      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                      R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                      std::string(2, '\0'), "a", "twice"},
        BadHeaderCase{"too_deep", std::string(100, '[') + std::string(100, ']'), "", "",
                      "nests deeper"}),
    [](const ::testing::TestParamInfo<BadHeaderCase>& info) { return info.param.label; });

TEST(SafetensorsTest, FileShorterThanLengthField) {
  TempDir dir;
  const std::string path = dir.Write("short.safetensors", "\x05\x00\x00");
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(Msg(f.status()), AllOf(HasSubstr(path), HasSubstr("too short")));
}

TEST(SafetensorsTest, HeaderLengthBeyondFile) {
  TempDir dir;
  std::string bytes = RawSafetensors("{}", "");
  bytes[0] = 100;  // claims a 100-byte header; only 2 bytes follow
  const std::string path = dir.Write("hl.safetensors", bytes);
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(Msg(f.status()),
              AllOf(HasSubstr(path), HasSubstr("header length 100 exceeds the 2 bytes")));
}

TEST(SafetensorsTest, AbsurdHeaderLength) {
  TempDir dir;
  std::string bytes = RawSafetensors("{}", "");
  bytes[7] = 0x7f;
  const std::string path = dir.Write("absurd.safetensors", bytes);
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(Msg(f.status()), AllOf(HasSubstr(path), HasSubstr("exceeds the limit")));
}

TEST(SafetensorsTest, OpenMissingFileAndDirectoryNamePath) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> missing =
      SafetensorsFile::Open(dir.File("none.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(missing.status()), HasSubstr("none.safetensors"));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> directory = SafetensorsFile::Open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(Msg(directory.status()), HasSubstr(dir.path()));
}

TEST(SafetensorsTest, TensorNamesInErrorsAreEscaped) {
  const std::string header = "{\"bad\\u0000name\\n\":{\"dtype\":\"Q\"}}";
  absl::StatusOr<SafetensorsHeader> h = ParseSafetensors(AsBytes(RawSafetensors(header, "")), "m");
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(Msg(h.status()), HasSubstr("\"bad\\x00name\\n\""));
}

// ---- Robustness: no byte sequence crashes the parser -----------------------------------------

// Every accepted parse must describe tensors inside the buffer with consistent sizes.
void ExpectConsistent(const absl::StatusOr<SafetensorsHeader>& h, size_t size) {
  if (!h.ok()) {
    EXPECT_FALSE(h.status().message().empty());
    return;
  }
  for (const TensorInfo& t : h->tensors) {
    ASSERT_LE(t.file_offset, size);
    ASSERT_LE(t.byte_size, size - t.file_offset);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    ASSERT_EQ(n, t.num_elements);
    ASSERT_EQ(t.byte_size, static_cast<uint64_t>(n) * DTypeSize(t.dtype));
  }
}

TEST(SafetensorsFuzzTest, EveryTruncationFailsCleanly) {
  const std::string valid = SafetensorsBytes(SampleTensors());
  for (size_t len = 0; len < valid.size(); ++len) {
    const std::string cut = valid.substr(0, len);
    absl::StatusOr<SafetensorsHeader> h = ParseSafetensors(AsBytes(cut), "cut.safetensors");
    // The last tensor's data ends the file, so every strict prefix is invalid.
    ASSERT_FALSE(h.ok()) << "accepted a file truncated to " << len << " bytes";
    ASSERT_THAT(Msg(h.status()), HasSubstr("cut.safetensors"));
  }
  EXPECT_TRUE(ParseSafetensors(AsBytes(valid), "full").ok());
}

TEST(SafetensorsFuzzTest, EverySingleByteMutationIsHandled) {
  const std::string valid = SafetensorsBytes(SampleTensors());
  const uint8_t replacements[] = {0x00, 0xff, '{', '}', '[', ']', '"',  ',',
                                  ':',  '-',  '9', '0', ' ', 'e', '\\', 0x80};
  for (size_t pos = 0; pos < valid.size(); ++pos) {
    for (uint8_t r : replacements) {
      std::string mutated = valid;
      mutated[pos] = static_cast<char>(r);
      ExpectConsistent(ParseSafetensors(AsBytes(mutated), "m"), mutated.size());
    }
    for (int bit = 0; bit < 8; ++bit) {
      std::string mutated = valid;
      mutated[pos] = static_cast<char>(mutated[pos] ^ (1 << bit));
      ExpectConsistent(ParseSafetensors(AsBytes(mutated), "m"), mutated.size());
    }
  }
}

TEST(SafetensorsFuzzTest, RandomMultiByteMutationsAndSplices) {
  const std::string valid = SafetensorsBytes(SampleTensors());
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string mutated = valid;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % mutated.size();
      switch (rng() % 4) {
        case 0:
          mutated[pos] = static_cast<char>(rng());
          break;
        case 1:
          mutated.erase(pos, 1 + rng() % 4);
          break;
        case 2:
          mutated.insert(pos, 1, static_cast<char>(rng()));
          break;
        default:
          mutated.resize(pos);
          break;
      }
      if (mutated.empty()) break;
    }
    ExpectConsistent(ParseSafetensors(AsBytes(mutated), "m"), mutated.size());
  }
}

TEST(SafetensorsFuzzTest, RandomGarbage) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string garbage(rng() % 256, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    if (garbage.size() >= 8 && iter % 2 == 0) {
      // A plausible length so the JSON parser sees the garbage.
      const uint64_t n = garbage.size() - 8 - rng() % (garbage.size() - 7);
      for (int i = 0; i < 8; ++i) garbage[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    }
    ExpectConsistent(ParseSafetensors(AsBytes(garbage), "g"), garbage.size());
  }
}

}  // namespace
}  // namespace tandem::models
