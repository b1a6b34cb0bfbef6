// The CUDA dense kernels (kernels/cuda/dense_kernels.h) against the reference backend on ragged
// shapes: row and column counts off every block and warp width, strided rows, every weight
// format. They skip without a CUDA device (CI), and run on a lent GPU via scripts/gpu-check.sh.
#include "kernels/cuda/dense_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/argmax.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/weight_matrix.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::AllClose;
using kernels::testing::Rng;
using testing::MakeDeviceWeights;
using testing::ToDevice;
using testing::ToHost;

TEST(CudaDenseKernelsTest, RmsNormMatchesReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(1);
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t dim : {1, 31, 256, 1000, 4099}) {
      const int64_t ld_x = dim + 3, ld_out = dim + 1;
      const std::vector<float> x = rng.Uniform(rows * ld_x, -2, 2), w = rng.Uniform(dim);
      std::vector<float> want(rows * ld_out, 0.0f);
      ReferenceOps().RmsNorm(x.data(), ld_x, rows, dim, w.data(), 1e-6f, want.data(), ld_out);
      auto dx = ToDevice(x), dw = ToDevice(w), dout = ToDevice(std::vector<float>(rows * ld_out));
      ASSERT_CUDA_OK(
          RmsNorm(nullptr, dx.get(), ld_x, rows, dim, dw.get(), 1e-6f, dout.get(), ld_out));
      const std::vector<float> got = ToHost(dout);
      ASSERT_TRUE(AllClose(got.data(), want.data(), got.size(), 1e-5f, 1e-5f))
          << "rows=" << rows << " dim=" << dim;
    }
  }
}

// A norm spread over tensor-parallel workers: the halves' sums of squares added, each half
// normalised by them, is the whole row's RmsNorm.
TEST(CudaDenseKernelsTest, SplitRmsNormMatchesTheWholeRow) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(21);
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t half : {1, 31, 700, 2050}) {
      const int64_t dim = 2 * half, ld = dim + 5;
      const std::vector<float> x = rng.Uniform(rows * ld, -2, 2), w = rng.Uniform(dim);
      std::vector<float> want(rows * ld, 0.0f);
      ReferenceOps().RmsNorm(x.data(), ld, rows, dim, w.data(), 1e-6f, want.data(), ld);
      auto dx = ToDevice(x), dw = ToDevice(w);
      auto first = ToDevice(std::vector<float>(rows)), second = ToDevice(std::vector<float>(rows));
      ASSERT_CUDA_OK(RowSquareSums(nullptr, dx.get(), ld, rows, half, first.get()));
      ASSERT_CUDA_OK(RowSquareSums(nullptr, dx.get() + half, ld, rows, half, second.get()));
      std::vector<float> sums = ToHost(first);
      const std::vector<float> more = ToHost(second);
      for (int64_t r = 0; r < rows; ++r) sums[r] += more[r];
      auto dsums = ToDevice(sums);
      ASSERT_CUDA_OK(
          RmsNormBySums(nullptr, dx.get(), ld, rows, half, dsums.get(), dim, dw.get(), 1e-6f));
      ASSERT_CUDA_OK(RmsNormBySums(nullptr, dx.get() + half, ld, rows, half, dsums.get(), dim,
                                   dw.get() + half, 1e-6f));
      const std::vector<float> got = ToHost(dx);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(AllClose(got.data() + r * ld, want.data() + r * ld, dim, 1e-5f, 1e-5f))
            << "rows=" << rows << " dim=" << dim;
      }
    }
  }
}

TEST(CudaDenseKernelsTest, GatedRmsNormMatchesReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(2);
  for (int64_t rows : {1, 5}) {
    for (auto [dim, groups] : {std::pair<int64_t, int32_t>{64, 1}, {96, 2}, {1536, 8}, {70, 7}}) {
      const int64_t ld = dim + 2;
      const std::vector<float> y = rng.Uniform(rows * ld), z = rng.Uniform(rows * ld, -3, 3),
                               w = rng.Uniform(dim);
      std::vector<float> want(rows * ld, 0.0f);
      ReferenceOps().GatedRmsNorm(y.data(), ld, z.data(), ld, rows, dim, groups, w.data(), 1e-5f,
                                  want.data(), ld);
      auto dy = ToDevice(y), dz = ToDevice(z), dw = ToDevice(w);
      auto dout = ToDevice(std::vector<float>(rows * ld));
      ASSERT_CUDA_OK(GatedRmsNorm(nullptr, dy.get(), ld, dz.get(), ld, rows, dim, groups, dw.get(),
                                  1e-5f, dout.get(), ld));
      const std::vector<float> got = ToHost(dout);
      ASSERT_TRUE(AllClose(got.data(), want.data(), got.size(), 1e-5f, 1e-5f))
          << "rows=" << rows << " dim=" << dim << " groups=" << groups;
    }
  }
}

TEST(CudaDenseKernelsTest, RopeMatchesReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(3);
  for (int32_t heads : {1, 4}) {
    for (int32_t head_dim : {2, 64, 128}) {
      for (int64_t tokens : {1, 7}) {
        for (int64_t start : {0, 1000}) {
          const int64_t ld = int64_t{heads} * head_dim + 5;
          std::vector<float> want = rng.Uniform(tokens * ld);
          auto dx = ToDevice(want);
          ReferenceOps().Rope(want.data(), ld, tokens, heads, head_dim, start, 10000.0f);
          ASSERT_CUDA_OK(
              Rope(nullptr, dx.get(), ld, tokens, heads, head_dim, start, nullptr, 10000.0f));
          const std::vector<float> got = ToHost(dx);
          ASSERT_TRUE(AllClose(got.data(), want.data(), got.size(), 1e-5f, 1e-5f))
              << "heads=" << heads << " head_dim=" << head_dim << " tokens=" << tokens
              << " start=" << start;
        }
      }
    }
  }
}

TEST(CudaDenseKernelsTest, GatedActivationMatchesReferenceAlsoInPlace) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(4);
  for (Activation act : {Activation::kSilu, Activation::kGelu}) {
    const int64_t rows = 9, cols = 333, ld = 2 * cols;
    const std::vector<float> gu = rng.Uniform(rows * ld, -4, 4);
    std::vector<float> want(rows * ld, 0.0f);
    ReferenceOps().GatedActivation(act, gu.data(), ld, gu.data() + cols, ld, rows, cols,
                                   want.data(), ld);
    auto dgu = ToDevice(gu);
    // In place over the gate half, as CpuOps::GatedMlp does.
    ASSERT_CUDA_OK(GatedActivation(nullptr, act, dgu.get(), ld, dgu.get() + cols, ld, rows, cols,
                                   dgu.get(), ld));
    const std::vector<float> got = ToHost(dgu);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(AllClose(got.data() + r * ld, want.data() + r * ld, cols, 1e-6f, 1e-5f))
          << "row " << r;
    }
  }
}

class CudaLinearTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(CudaLinearTest, MatchesReferenceOnRaggedShapes) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(5);
  // Rows 1-9 take the decode kernel, 16 and more the tiled one (64 × 64 tiles, depth 16). The
  // decode kernel loads 16 bytes at a time where k is a multiple of 16 bytes of weights and x's
  // rows are 16-byte aligned (ld_x a multiple of 4), one element at a time elsewhere.
  for (int64_t m : {1, 2, 7, 8, 9, 16, 33, 130}) {
    for (int64_t k : {1, 15, 31, 32, 33, 64, 1000, 1024}) {
      for (int64_t n : {1, 5, 67, 130}) {
        for (const bool aligned_x : {false, true}) {
          const bool with_bias = (m + k + n) % 2 == 0;
          const int64_t ld_x = aligned_x ? (k + 3) / 4 * 4 + 4 : k + 1, ld_y = n + 3;
          const auto w =
              MakeDeviceWeights(GetParam(), n, k, static_cast<uint32_t>(m * 1000 + k + n));
          const std::vector<float> x = rng.Uniform(m * ld_x), b = rng.Uniform(n);
          std::vector<float> want(m * ld_y, 0.0f);
          ReferenceOps().Linear(x.data(), ld_x, m, w->host, with_bias ? b.data() : nullptr,
                                want.data(), ld_y);
          auto dx = ToDevice(x), db = ToDevice(b), dy = ToDevice(std::vector<float>(m * ld_y));
          ASSERT_CUDA_OK(Linear(nullptr, dx.get(), ld_x, m, w->device,
                                with_bias ? db.get() : nullptr, dy.get(), ld_y));
          const std::vector<float> got = ToHost(dy);
          for (int64_t i = 0; i < m; ++i) {
            ASSERT_TRUE(AllClose(got.data() + i * ld_y, want.data() + i * ld_y, n, 1e-4f, 1e-4f))
                << "m=" << m << " k=" << k << " n=" << n << " ld_x=" << ld_x << " row " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CudaLinearTest,
                         ::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                           WeightFormat::kF16, WeightFormat::kI8),
                         [](const auto& info) {
                           return std::string(WeightFormatName(info.param));
                         });

TEST(CudaDenseKernelsTest, RowGatherCopyAndAddMatchReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(6);
  const int64_t rows = 11, cols = 300, ld_src = 310, ld_dst = 305;
  for (WeightFormat format :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16, WeightFormat::kI8}) {
    const auto table = MakeDeviceWeights(format, 50, cols, 7);
    const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
    std::vector<float> want(ids.size() * ld_dst, 0.0f);
    ReferenceOps().GatherRows(table->host, ids, want.data(), ld_dst);
    auto dids = ToDevice(ids);
    auto dout = ToDevice(std::vector<float>(want.size(), 0.0f));
    ASSERT_CUDA_OK(GatherRows(nullptr, table->device, dids.get(), static_cast<int64_t>(ids.size()),
                              dout.get(), ld_dst));
    ASSERT_TRUE(AllClose(ToHost(dout), want, 0.0f, 0.0f)) << WeightFormatName(format);
  }
  const std::vector<float> src = rng.Uniform(rows * ld_src), dst0 = rng.Uniform(rows * ld_dst);
  for (bool add : {false, true}) {
    std::vector<float> want = dst0;
    auto dsrc = ToDevice(src), ddst = ToDevice(dst0);
    if (add) {
      ReferenceOps().AddRows(src.data(), ld_src, rows, cols, want.data(), ld_dst);
      ASSERT_CUDA_OK(AddRows(nullptr, dsrc.get(), ld_src, rows, cols, ddst.get(), ld_dst));
    } else {
      ReferenceOps().CopyRows(src.data(), ld_src, rows, cols, want.data(), ld_dst);
      ASSERT_CUDA_OK(CopyRows(nullptr, dsrc.get(), ld_src, rows, cols, ddst.get(), ld_dst));
    }
    // Columns past `cols` keep their values: the strides are honoured.
    ASSERT_TRUE(AllClose(ToHost(ddst), want, 0.0f, 0.0f)) << (add ? "add" : "copy");
  }
  // Activations in place against the host's formulas (relu² exactly).
  for (Activation act : {Activation::kSilu, Activation::kGelu, Activation::kReluSquared}) {
    std::vector<float> host = dst0;
    for (float& v : host) v -= 0.5f;
    auto dev = ToDevice(host);
    ReferenceOps().Activate(act, host.data(), ld_dst, rows, cols);
    ASSERT_CUDA_OK(Activate(nullptr, act, dev.get(), ld_dst, rows, cols));
    const float tolerance = act == Activation::kReluSquared ? 0.0f : 1e-6f;
    ASSERT_TRUE(AllClose(ToHost(dev), host, tolerance, tolerance)) << static_cast<int>(act);
  }
  // A scale is one rounded product (or quotient) per element, bit for bit the host's.
  std::vector<float> want = dst0;
  auto ddst = ToDevice(dst0);
  ReferenceOps().ScaleRows(want.data(), ld_dst, rows, cols, 1.0f / 6.0f);
  ASSERT_CUDA_OK(ScaleRows(nullptr, ddst.get(), ld_dst, rows, cols, 1.0f / 6.0f, false));
  ASSERT_TRUE(AllClose(ToHost(ddst), want, 0.0f, 0.0f)) << "scale";
  ReferenceOps().DivideRows(want.data(), ld_dst, rows, cols, 6.0f);
  ASSERT_CUDA_OK(ScaleRows(nullptr, ddst.get(), ld_dst, rows, cols, 6.0f, true));
  ASSERT_TRUE(AllClose(ToHost(ddst), want, 0.0f, 0.0f)) << "divide";
}

// Arguments the kernels cannot take are refused before launch, not run.
// The device argmax must pick exactly kernels::ArgmaxRow's index: ties, NaN first or later,
// infinities, and vocabulary-sized rows whose maximum sits in any thread's stripe.
TEST(CudaDenseKernelsTest, ArgmaxRowsPickTheHostsIndex) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  const float nan = std::nanf(""), inf = INFINITY;
  const std::vector<std::vector<float>> small = {{0.5f, 2.0f, -1.0f, 2.0f},
                                                 {nan, 5.0f, 7.0f},
                                                 {1.0f, nan, 4.0f, nan, 4.0f},
                                                 {-inf, -inf, -inf},
                                                 {-1.0f, inf, inf, 9.0f}};
  const int64_t cols = 70001, ld = cols + 3;
  Rng rng(17);
  std::vector<float> matrix = rng.Uniform((small.size() + 4) * ld);
  for (size_t r = 0; r < small.size(); ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      matrix[r * ld + c] = c < static_cast<int64_t>(small[r].size()) ? small[r][c] : -inf;
    }
  }
  const size_t big = small.size();
  matrix[big * ld + 69999] = 2.0f;      // the last stripe
  matrix[(big + 1) * ld + 300] = 2.0f;  // two equal maxima: the lower wins
  matrix[(big + 1) * ld + 40000] = 2.0f;
  matrix[(big + 2) * ld + 0] = nan;  // NaN first: 0
  matrix[(big + 3) * ld + 5] = nan;  // NaN later: passed over
  const int64_t rows = static_cast<int64_t>(small.size()) + 4;
  auto dm = ToDevice(matrix);
  auto dout = ToDevice(std::vector<int32_t>(rows, -1));
  ASSERT_CUDA_OK(ArgmaxRows(nullptr, dm.get(), ld, rows, cols, dout.get()));
  const std::vector<int32_t> got = ToHost(dout);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(got[r], ArgmaxRow(matrix.data() + r * ld, cols)) << "row " << r;
  }
}

TEST(CudaDenseKernelsTest, RefusesWhatItCannotRun) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto buffer = ToDevice(std::vector<float>(64, 1.0f));
  EXPECT_EQ(Rope(nullptr, buffer.get(), 8, 1, 1, 7, 0, nullptr, 10000.0f), cudaErrorInvalidValue);
  EXPECT_EQ(GatedRmsNorm(nullptr, buffer.get(), 8, buffer.get(), 8, 1, 8, 3, buffer.get(), 1e-5f,
                         buffer.get(), 8),
            cudaErrorInvalidValue);
  const WeightMatrix misaligned{WeightFormat::kBF16,
                                reinterpret_cast<const uint8_t*>(buffer.get()) + 1, nullptr, 2, 4};
  EXPECT_EQ(Linear(nullptr, buffer.get(), 4, 1, misaligned, nullptr, buffer.get(), 2),
            cudaErrorInvalidValue);
  const WeightMatrix unscaled{WeightFormat::kI8, buffer.get(), nullptr, 2, 4};
  EXPECT_EQ(Linear(nullptr, buffer.get(), 4, 1, unscaled, nullptr, buffer.get(), 2),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace tandem::kernels::cuda
