// Weights in bf16, f16 and int8 (kernels/weight_matrix.h): the 16-bit conversions against every
// bit pattern and the CPU's own converter, and the GEMM paths for each format on every
// instruction set. The 16-bit formats must give exactly the bits of the fp32 kernel run on their
// widened values; int8 must compute scale · Σ x·q.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm.h"
#include "kernels/half_float.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/weight_matrix.h"
#include "tests/kernels/test_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem::kernels {
namespace {

using testing::Rng;

TEST(HalfFloatTest, EveryF16AndBf16ValueSurvivesARoundTrip) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f16 = F16BitsToFloat(bits), bf16 = Bf16BitsToFloat(bits);
    if (std::isnan(f16)) {
      EXPECT_TRUE(std::isnan(F16BitsToFloat(FloatToF16Bits(f16)))) << std::hex << h;
    } else {
      ASSERT_EQ(FloatToF16Bits(f16), bits) << std::hex << h;
    }
    if (std::isnan(bf16)) {
      EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(bf16)))) << std::hex << h;
    } else {
      ASSERT_EQ(FloatToBf16Bits(bf16), bits) << std::hex << h;
    }
  }
}

TEST(HalfFloatTest, F16RoundsToNearestEven) {
  EXPECT_EQ(FloatToF16Bits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToF16Bits(65519.996f), 0x7bff);
  EXPECT_EQ(FloatToF16Bits(65520.0f), 0x7c00);  // halfway: the even neighbour, 2^16, is inf
  EXPECT_EQ(FloatToF16Bits(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToF16Bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToF16Bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToF16Bits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(FloatToF16Bits(std::ldexp(1.5f, -24)), 0x0002);  // tie to even: 2
  EXPECT_EQ(FloatToF16Bits(std::ldexp(2.5f, -24)), 0x0002);
  EXPECT_EQ(FloatToF16Bits(std::ldexp(1023.5f, -24)), 0x0400);  // up into the normals
  EXPECT_EQ(FloatToF16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even mantissa
  EXPECT_EQ(FloatToF16Bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToF16Bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(F16BitsToFloat(FloatToF16Bits(std::nanf("")))));
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t HardwareF16(float v) {
  return static_cast<uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
}

TEST(HalfFloatTest, F16MatchesTheCpuConverter) {
  if (!CpuHasF16c()) GTEST_SKIP() << "no F16C";
  std::mt19937 gen(3);
  for (int i = 0; i < 2'000'000; ++i) {
    // Every exponent a float has, so subnormal, normal, overflow and NaN inputs all come up.
    const uint32_t bits = gen();
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    if (std::isnan(v)) continue;  // payload handling may differ; NaN-ness is checked above
    ASSERT_EQ(FloatToF16Bits(v), HardwareF16(v)) << std::hex << bits;
  }
}
#endif

// A random [rows, cols] matrix in `format`, its widened fp32 values, and owned storage.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<float> widened;
  WeightMatrix matrix;
};

// `offset` shifts the data by that many bytes: checkpoint bf16 can sit at any byte offset.
TestMatrix MakeMatrix(WeightFormat format, int64_t rows, int64_t cols, uint32_t seed,
                      size_t offset = 0) {
  Rng rng(seed);
  const std::vector<float> values = rng.Uniform(rows * cols);
  TestMatrix t;
  t.bytes.resize(offset + static_cast<size_t>(rows * cols) * WeightElementBytes(format) + 1);
  t.scales.resize(rows);
  ConvertWeights(values.data(), rows, cols, format, t.bytes.data() + offset, t.scales.data());
  t.matrix = {format, t.bytes.data() + offset,
              format == WeightFormat::kI8 ? t.scales.data() : nullptr, rows, cols};
  t.widened.resize(rows * cols);
  DequantizeRows(t.matrix, 0, rows, t.widened.data());
  return t;
}

std::string FormatCase(GemmIsa isa, WeightFormat format) {
  const char* isa_name = isa == GemmIsa::kAvx512 ? "Avx512" : isa == GemmIsa::kAvx2 ? "Avx2"
                                                                                    : "Scalar";
  return std::string(isa_name) + "_" + std::string(WeightFormatName(format));
}

class FormatGemmTest : public ::testing::TestWithParam<std::tuple<GemmIsa, WeightFormat>> {
 protected:
  void SetUp() override {
    if (!GemmIsaSupported(isa())) GTEST_SKIP() << "this CPU lacks the instruction set";
  }
  GemmIsa isa() const { return std::get<0>(GetParam()); }
  WeightFormat format() const { return std::get<1>(GetParam()); }
};

using SixteenBitGemmTest = FormatGemmTest;

// 16-bit weights: the same bits as the fp32 kernel on the widened values, at every tile edge,
// k across the AVX-512 kernel's cache blocks, column slices, strides and a misaligned matrix.
TEST_P(SixteenBitGemmTest, GivesTheFp32KernelsBits) {
  Rng rng(11);
  for (const int64_t k : {1, 7, 16, 33, 200, 4100}) {
    for (const int64_t m : {1, 2, 3, 5, 16, 41, 70}) {
      const int64_t n = 31, ld_x = k + 3, ld_y = n + 2;
      const TestMatrix w = MakeMatrix(format(), n, k, static_cast<uint32_t>(k * 100 + m), 1);
      const std::vector<float> x = rng.Uniform(m * ld_x), b = rng.Uniform(n);
      std::vector<float> got(m * ld_y, 7.0f), want(m * ld_y, 7.0f);
      const WeightMatrix f32 = WeightMatrix::F32(w.widened.data(), n, k);
      for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, 13}, {13, n}}) {
        OwnGemmNTWith(isa(), x.data(), ld_x, m, w.matrix, b.data(), n0, n1, got.data(), ld_y);
        OwnGemmNTWith(isa(), x.data(), ld_x, m, f32, b.data(), n0, n1, want.data(), ld_y);
      }
      for (size_t e = 0; e < got.size(); ++e) {
        ASSERT_EQ(got[e], want[e]) << "k=" << k << " m=" << m << " element " << e;
      }
    }
  }
}

// Every format against scale · Σ x·q (int8) or Σ x·w (16-bit) in double precision.
TEST_P(FormatGemmTest, MatchesTheFormulaInDouble) {
  Rng rng(12);
  for (const int64_t k : {3, 37, 161, 4097}) {
    for (const int64_t m : {1, 2, 4, 9, 33}) {
      const int64_t n = 29;
      const TestMatrix w = MakeMatrix(format(), n, k, static_cast<uint32_t>(k + m), 3);
      const std::vector<float> x = rng.Uniform(m * k), b = rng.Uniform(n);
      std::vector<float> y(m * n);
      OwnGemmNTWith(isa(), x.data(), k, m, w.matrix, b.data(), 0, n, y.data(), n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double want = b[j], mag = std::fabs(want);
          for (int64_t q = 0; q < k; ++q) {
            want += double{x[i * k + q]} * w.widened[j * k + q];
            mag += std::fabs(double{x[i * k + q]} * w.widened[j * k + q]);
          }
          const double tol = 1e-6 + 1e-6 * std::sqrt(double(k) + 1) * mag;
          ASSERT_NEAR(y[i * n + j], want, tol) << "k=" << k << " m=" << m << " j=" << j;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllIsasAndFormats, FormatGemmTest,
    ::testing::Combine(::testing::Values(GemmIsa::kAvx512, GemmIsa::kAvx2, GemmIsa::kScalar),
                       ::testing::Values(WeightFormat::kBF16, WeightFormat::kF16,
                                         WeightFormat::kI8)),
    [](const auto& info) {
      return FormatCase(std::get<0>(info.param), std::get<1>(info.param));
    });

INSTANTIATE_TEST_SUITE_P(
    AllIsas, SixteenBitGemmTest,
    ::testing::Combine(::testing::Values(GemmIsa::kAvx512, GemmIsa::kAvx2, GemmIsa::kScalar),
                       ::testing::Values(WeightFormat::kBF16, WeightFormat::kF16)),
    [](const auto& info) {
      return FormatCase(std::get<0>(info.param), std::get<1>(info.param));
    });

class FormatLinearTest : public ::testing::TestWithParam<WeightFormat> {};

// CpuOps::Linear on both GEMM paths (ours, and sgemm on widened panels, which is split into
// several panels here) and its thread split, against the reference backend.
TEST_P(FormatLinearTest, BothPathsMatchTheReference) {
  CpuOps cpu(2);
  ReferenceOps ref;
  Rng rng(13);
  const int64_t k = 150, n = 517;
  const TestMatrix w = MakeMatrix(GetParam(), n, k, 5, 1);
  const std::vector<float> b = rng.Uniform(n);
  for (const GemmImpl impl : {GemmImpl::kAuto, GemmImpl::kOwn, GemmImpl::kBlas}) {
    cpu.set_gemm_impl(impl);
    for (const int64_t m : {1, 2, 40, 41, 130}) {
      const std::vector<float> x = rng.Uniform(m * k);
      std::vector<float> got(m * n), want(m * n);
      cpu.Linear(x.data(), k, m, w.matrix, b.data(), got.data(), n);
      ref.Linear(x.data(), k, m, w.matrix, b.data(), want.data(), n);
      ASSERT_TRUE(testing::AllClose(got, want, 1e-4f, 1e-4f))
          << "m=" << m << " impl=" << static_cast<int>(impl);
    }
  }
}

// Batch invariance holds for every format: a row's bits do not depend on the row count.
TEST_P(FormatLinearTest, BatchInvariantAtEveryRowCount) {
  CpuOps cpu(2);
  cpu.set_batch_invariant(true);
  Rng rng(14);
  const int64_t k = 300, n = 203;
  const TestMatrix w = MakeMatrix(GetParam(), n, k, 6);
  const std::vector<float> x = rng.Uniform(130 * k), b = rng.Uniform(n);
  std::vector<float> first(n);
  cpu.Linear(x.data(), k, 1, w.matrix, b.data(), first.data(), n);
  for (const int64_t m : {2, 17, 41, 130}) {
    std::vector<float> y(m * n);
    cpu.Linear(x.data(), k, m, w.matrix, b.data(), y.data(), n);
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(y[j], first[j]) << "m=" << m << " column " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, FormatLinearTest,
                         ::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                           WeightFormat::kF16, WeightFormat::kI8),
                         [](const auto& info) { return std::string(WeightFormatName(info.param)); });

TEST(Int8WeightsTest, PerRowScalesAndRounding) {
  const std::vector<float> w = {0.5f, -1.27f, 0.01f, 0.0f,  // max 1.27: scale 0.01
                                0.0f, 0.0f,   0.0f,  0.0f,  // an all-zero row
                                -3.0f, 1.0f,  1.5f,  2.0f};
  std::vector<int8_t> q(12);
  std::vector<float> scales(3);
  ConvertWeights(w.data(), 3, 4, WeightFormat::kI8, q.data(), scales.data());
  EXPECT_FLOAT_EQ(scales[0], 1.27f / 127.0f);
  EXPECT_EQ(q[0], 50);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 1);
  EXPECT_EQ(scales[1], 0.0f);
  for (int c = 4; c < 8; ++c) EXPECT_EQ(q[c], 0);
  EXPECT_EQ(q[8], -127);
  const WeightMatrix m{WeightFormat::kI8, q.data(), scales.data(), 3, 4};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) {
      // Round to nearest: within half a step of the original.
      EXPECT_LE(std::fabs(m.At(r, c) - w[r * 4 + c]), 0.5f * scales[r] * 1.0001f);
    }
  }
  EXPECT_EQ(m.bytes(), 12u + 3 * sizeof(float));
  EXPECT_EQ(m.Rows(2, 3).At(0, 0), m.At(2, 0));
}

}  // namespace
}  // namespace tandem::kernels
