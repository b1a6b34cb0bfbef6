// Tests of models/npy: the writer's bytes match numpy.save; the reader round-trips and rejects
// what it cannot represent.
#include "models/npy.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/models/safetensors_writer.h"

namespace tandem::models {
namespace {

using ::tandem::models::testing::ReadFileBytes;
using ::tandem::models::testing::TempDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// Hand-built .npy bytes: magic, version, `len_bytes`-wide length, dict padded to 64, data.
std::string NpyBytes(std::string_view dict, std::string_view data, int major = 1) {
  const size_t len_bytes = major == 1 ? 2 : 4;
  std::string header(dict);
  while ((6 + 2 + len_bytes + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < len_bytes; ++i) {
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  }
  return out + header + std::string(data);
}

std::string DoubleBytes(const std::vector<double>& v) {
  std::string out(v.size() * 8, '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(NpyTest, HeaderMatchesNumpyFor2x3) {
  // numpy.save(f, np.zeros((2, 3), np.float32)) writes exactly these 128 header bytes: the dict,
  // 20 spaces of growth room for the first dimension, padding spaces, and a newline.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string expected("\x93NUMPY\x01\x00\x76\x00", 10);
  expected += dict;
  expected.append(128 - 10 - dict.size() - 1, ' ');
  expected += '\n';
  const std::vector<int64_t> shape = {2, 3};
  EXPECT_EQ(NpyFloat32Header(shape), expected);
}

TEST(NpyTest, HeaderLayoutForManyShapes) {
  const std::vector<std::pair<std::vector<int64_t>, std::string>> cases = {
      {{}, "()"},
      {{5}, "(5,)"},
      {{0}, "(0,)"},
      {{2, 3}, "(2, 3)"},
      {{4, 1, 7}, "(4, 1, 7)"},
      {{123456789012, 2}, "(123456789012, 2)"},
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       "(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)"},
  };
  for (const auto& [shape, repr] : cases) {
    const std::string h = NpyFloat32Header(shape);
    SCOPED_TRACE(repr);
    ASSERT_EQ(h.size() % 64, 0u);
    ASSERT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t stored = static_cast<uint8_t>(h[8]) | (static_cast<uint8_t>(h[9]) << 8);
    EXPECT_EQ(stored, h.size() - 10);
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + repr + ", }";
    EXPECT_EQ(h.substr(10, dict.size()), dict);
    EXPECT_EQ(h.back(), '\n');
    const std::string padding = h.substr(10 + dict.size(), h.size() - 11 - dict.size());
    EXPECT_EQ(padding.find_first_not_of(' '), std::string::npos);
    // Room for the first dimension to grow to 21 digits without rewriting the file.
    if (!shape.empty()) {
      EXPECT_GE(padding.size(), 21 - std::to_string(shape[0]).size());
    }
  }
}

TEST(NpyTest, WriteThenReadRoundTrips) {
  TempDir dir;
  const std::vector<float> values = {0.0f,
                                     -0.0f,
                                     1.5f,
                                     -2.25e-30f,
                                     std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::denorm_min()};
  const std::string path = dir.File("x.npy");
  ASSERT_TRUE(WriteNpy(path, std::vector<int64_t>{2, 3}, values).ok());
  const std::string bytes = ReadFileBytes(path);
  EXPECT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes.substr(0, 128), NpyFloat32Header(std::vector<int64_t>{2, 3}));

  absl::StatusOr<NpyArray> a = ReadNpy(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(2, 3));
  ASSERT_EQ(a->data.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a->data[i], &values[i], 4), 0) << i;
  }
}

TEST(NpyTest, ScalarAndEmptyArrays) {
  TempDir dir;
  ASSERT_TRUE(WriteNpy(dir.File("s.npy"), {}, std::vector<float>{42.0f}).ok());
  absl::StatusOr<NpyArray> s = ReadNpy(dir.File("s.npy"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->shape.empty());
  EXPECT_THAT(s->data, ElementsAre(42.0f));

  ASSERT_TRUE(WriteNpy(dir.File("e.npy"), std::vector<int64_t>{0, 3}, {}).ok());
  absl::StatusOr<NpyArray> e = ReadNpy(dir.File("e.npy"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->shape, ElementsAre(0, 3));
  EXPECT_TRUE(e->data.empty());
}

TEST(NpyTest, WriteRejectsSizeMismatchAndBadShape) {
  TempDir dir;
  absl::Status s =
      WriteNpy(dir.File("bad.npy"), std::vector<int64_t>{2, 2}, std::vector<float>{1, 2, 3});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("bad.npy"), HasSubstr("(2, 2)"), HasSubstr("3")));
  EXPECT_FALSE(WriteNpy(dir.File("neg.npy"), std::vector<int64_t>{-1}, {}).ok());
  absl::Status nodir =
      WriteNpy(dir.File("no/such/dir.npy"), std::vector<int64_t>{1}, std::vector<float>{1});
  EXPECT_THAT(Msg(nodir), HasSubstr("no/such/dir.npy"));
}

TEST(NpyTest, ReadsFloat64AsFloat) {
  TempDir dir;
  const std::string path =
      dir.Write("d.npy", NpyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                                  DoubleBytes({0.1, -1e300, 2.5})));
  absl::StatusOr<NpyArray> a = ReadNpy(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(3));
  EXPECT_THAT(a->data, ElementsAre(0.1f, -std::numeric_limits<float>::infinity(), 2.5f));
}

TEST(NpyTest, ReadsVersion2AndOtherKeyOrders) {
  TempDir dir;
  const std::string path = dir.Write(
      "v2.npy", NpyBytes("{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f4\"}",
                         std::string("\0\0\x80\x3f\0\0\0\x40", 8), /*major=*/2));
  absl::StatusOr<NpyArray> a = ReadNpy(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->data, ElementsAre(1.0f, 2.0f));
}

TEST(NpyTest, RejectsWithPreciseErrors) {
  const std::string f4x2(8, '\0');
  struct Case {
    std::string label;
    std::string bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"big_endian", NpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4x2),
       "unsupported dtype '>f4'"},
      {"int32", NpyBytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", f4x2),
       "unsupported dtype '<i4'"},
      {"half", NpyBytes("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", f4x2),
       "unsupported dtype '<f2'"},
      {"fortran", NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1), }", f4x2),
       "Fortran"},
      {"short_data", NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4x2),
       "needs 3 x 4 bytes but the file holds 8"},
      {"extra_data", NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4x2),
       "needs 1 x 4 bytes but the file holds 8"},
      {"bad_magic", "\x93NUMPX\x01\x00" + std::string(100, ' '), "bad magic"},
      {"empty", "", "bad magic"},
      {"version", NpyBytes("{}", "").replace(6, 1, "\x07"), "version 7.0"},
      {"missing_key", NpyBytes("{'descr': '<f4', 'shape': (2,), }", f4x2), "needs 'descr'"},
      {"extra_key",
       NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f4x2),
       "unexpected key 'x'"},
      {"negative_dim", NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", f4x2),
       "'shape' is not a tuple"},
      {"garbage_dict", NpyBytes("{'descr': '<f4' 'shape'", f4x2), "malformed header"},
      {"header_len", std::string("\x93NUMPY\x01\x00\xff\x7f", 10) + "{}", "exceeds the file"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    const std::string path = dir.Write(c.label + ".npy", c.bytes);
    absl::StatusOr<NpyArray> a = ReadNpy(path);
    ASSERT_FALSE(a.ok()) << c.label;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << c.label;
    EXPECT_THAT(Msg(a.status()), AllOf(HasSubstr(path), HasSubstr(c.expected))) << c.label;
  }
}

TEST(NpyTest, MissingFileNamesPath) {
  TempDir dir;
  absl::StatusOr<NpyArray> a = ReadNpy(dir.File("nope.npy"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(a.status()), HasSubstr("nope.npy"));
}

TEST(NpyTest, TruncationsNeverCrash) {
  const std::vector<int64_t> shape = {3, 2};
  std::string bytes = NpyFloat32Header(shape) + std::string(24, '\x01');
  for (size_t len = 0; len < bytes.size(); ++len) {
    const std::string cut = bytes.substr(0, len);
    absl::StatusOr<NpyArray> a =
        ParseNpy({reinterpret_cast<const uint8_t*>(cut.data()), cut.size()}, "cut.npy");
    ASSERT_FALSE(a.ok()) << len;
    ASSERT_THAT(Msg(a.status()), HasSubstr("cut.npy"));
  }
}

}  // namespace
}  // namespace tandem::models
