// CudaOps::Linear through cuBLAS (kernels/cuda/cublas_linear.h) against the reference backend:
// ragged shapes (rows on both sides of the 16-row switch, sizes off every tile width, strided x
// and y, with and without bias) in the exact mode (fp32 weights through cuBLAS, 16-bit weights
// still through our kernels) and the tensor-core mode; which path each product took; and a
// CudaOps whose cuBLAS cannot be loaded, which must still compute everything with our kernels.
// The loader's tests need no device; the rest skip without one. On a GPU machine
// (TANDEM_REQUIRE_CUDA) cuBLAS must be found: it is what these tests are for.
#include "kernels/cuda/cublas_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/weight_matrix.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::Rng;
using testing::DeviceWeights;
using testing::MakeDeviceWeights;
using testing::ToDevice;
using testing::ToHost;

bool RequireCuda() { return std::getenv("TANDEM_REQUIRE_CUDA") != nullptr; }

TEST(CublasLibraryTest, OpensOrSaysWhy) {
  std::string error;
  std::shared_ptr<const CublasLibrary> library = CublasLibrary::Default(&error);
  if (library == nullptr) {
    EXPECT_NE(error, "");
    if (RequireCuda()) FAIL() << "no cuBLAS on a GPU machine: " << error;
    GTEST_SKIP() << error;
  }
  EXPECT_NE(library->description().find("cuBLAS"), std::string::npos) << library->description();
  EXPECT_NE(library->gemm_ex, nullptr);
  EXPECT_NE(
      library->StatusName(CUBLAS_STATUS_NOT_SUPPORTED).find("CUBLAS_STATUS_NOT_SUPPORTED (15"),
      std::string::npos);
  // Asked again, the same library.
  std::string again;
  EXPECT_EQ(CublasLibrary::Default(&again), library);
}

TEST(CublasLibraryTest, AMissingLibraryIsAnErrorNamingIt) {
  std::string error;
  EXPECT_EQ(CublasLibrary::Open("/nonexistent/libcublas.so.13", &error), nullptr);
  EXPECT_NE(error.find("/nonexistent/libcublas.so.13"), std::string::npos) << error;
}

std::unique_ptr<DeviceWeights> MakeWeights(WeightFormat format, int64_t n, int64_t k,
                                           uint32_t seed) {
  return MakeDeviceWeights(format, n, k, seed, -0.5f, 0.5f);
}

// How far a product may be from the reference: |got - want| ≤ rel · Σ_p |x_p · w_p| + 1e-5.
// Bounding by the sum of the terms' magnitudes (not by |want|) is what rounding the inputs
// guarantees, also for outputs that cancel to near zero. fp32 throughout: only the order of the
// sums differs (k ≤ 300 terms: each side's error ≤ k · 2⁻²⁴ ≈ 1.8e-5 of the sum of
// magnitudes), so rel = 4e-5.
// TF32 keeps 10 of fp32's 23 mantissa bits in x and in w, truncated or rounded depending on
// the hardware: each factor within 2⁻¹⁰, a product within ~2 · 2⁻¹⁰ ≈ 2e-3, so rel = 2.5e-3.
// bf16 weights are exact; x rounded to bf16 (7 mantissa bits, to nearest) is within 2⁻⁸:
// rel = 4.5e-3. f16 (10 bits, to nearest): 2⁻¹¹, rel = 1e-3.
// `tensor_cores`: the product went through cuBLAS in the tensor-core mode.
float Tolerance(WeightFormat format, bool tensor_cores) {
  if (!tensor_cores || format == WeightFormat::kI8) return 4e-5f;
  switch (format) {
    case WeightFormat::kF32:
      return 2.5e-3f;
    case WeightFormat::kBF16:
      return 4.5e-3f;
    default:
      return 1e-3f;
  }
}

struct Shape {
  int64_t m, k, n;
};

// Runs every shape through ops->Linear and the reference; checks the results (and that y's
// padding columns are left alone), and which path took each product: cuBLAS from
// CublasLinear::kMinRows rows when `cublas_expected`, our kernels (exact in either mode)
// otherwise.
void ExpectMatchesReference(CudaOps& ops, WeightFormat format, bool cublas_expected) {
  const bool tensor_cores = ops.tensor_core_matmul();
  const float kPad = 7.0f;
  Rng rng(11);
  uint32_t seed = 100;
  for (const Shape& s : {Shape{15, 37, 53}, Shape{16, 37, 53}, Shape{17, 260, 130},
                         Shape{100, 37, 53}, Shape{513, 264, 136}, Shape{513, 300, 77}}) {
    for (const bool with_bias : {false, true}) {
      const int64_t ld_x = s.k + 3, ld_y = s.n + 5;
      const auto w = MakeWeights(format, s.n, s.k, ++seed);
      const std::vector<float> x = rng.Uniform(s.m * ld_x);
      const std::vector<float> bias = rng.Uniform(s.n);
      std::vector<float> want(s.m * ld_y, kPad);
      ReferenceOps().Linear(x.data(), ld_x, s.m, w->host, with_bias ? bias.data() : nullptr,
                            want.data(), ld_y);
      auto dx = ToDevice(x), dbias = ToDevice(bias);
      auto dy = ToDevice(std::vector<float>(s.m * ld_y, kPad));
      const int64_t calls = ops.cublas_linear_calls();
      ops.Linear(dx.get(), ld_x, s.m, w->device, with_bias ? dbias.get() : nullptr, dy.get(), ld_y);
      ASSERT_EQ(ops.Synchronize(), "");
      const std::string what = std::string(WeightFormatName(format)) +
                               (tensor_cores ? " tensor cores" : " exact") +
                               " m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) +
                               " n=" + std::to_string(s.n) + (with_bias ? " bias" : "");
      const bool by_cublas = cublas_expected && s.m >= CublasLinear::kMinRows;
      EXPECT_EQ(ops.cublas_linear_calls() - calls, by_cublas ? 1 : 0) << what;
      const float rel = Tolerance(format, by_cublas && tensor_cores);
      const std::vector<float> got = ToHost(dy);
      for (int64_t r = 0; r < s.m; ++r) {
        for (int64_t c = 0; c < ld_y; ++c) {
          const size_t i = static_cast<size_t>(r * ld_y + c);
          if (c >= s.n) {
            ASSERT_EQ(got[i], kPad) << what << ": padding of row " << r << " written";
            continue;
          }
          float magnitude = 0.0f;
          for (int64_t p = 0; p < s.k; ++p) {
            magnitude += std::fabs(x[r * ld_x + p] * w->host.At(c, p));
          }
          ASSERT_LE(std::fabs(got[i] - want[i]), rel * magnitude + 1e-5f)
              << what << ": y[" << r << "][" << c << "] = " << got[i] << ", want " << want[i];
        }
      }
    }
  }
}

// On a GPU machine cuBLAS must be there (the test bundle relies on the machine's own).
void ExpectCublasWhereRequired(const CudaOps& ops) {
  if (RequireCuda()) {
    ASSERT_TRUE(ops.has_cublas()) << ops.cublas_status();
  } else if (!ops.has_cublas()) {
    std::printf("cuBLAS not loaded (%s): our kernels are checked instead\n",
                ops.cublas_status().c_str());
  }
}

TEST(CublasLinearTest, ExactModeMatchesTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = testing::NewOps();
  ASSERT_NE(ops, nullptr);
  ExpectCublasWhereRequired(*ops);
  EXPECT_FALSE(ops->tensor_core_matmul());  // exact unless asked
  // fp32 weights through cuBLAS's fp32 GEMM; 16-bit and int8 weights through our kernels.
  ExpectMatchesReference(*ops, WeightFormat::kF32, ops->has_cublas());
  ExpectMatchesReference(*ops, WeightFormat::kBF16, false);
  ExpectMatchesReference(*ops, WeightFormat::kF16, false);
  ExpectMatchesReference(*ops, WeightFormat::kI8, false);
}

TEST(CublasLinearTest, TensorCoreModeMatchesWithinItsRounding) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  std::string error;
  CudaOpsOptions options;
  options.tensor_core_matmul = true;
  auto ops = CudaOps::Create(0, options, &error);
  ASSERT_NE(ops, nullptr) << error;
  ExpectCublasWhereRequired(*ops);
  ExpectMatchesReference(*ops, WeightFormat::kF32, ops->has_cublas());
  ExpectMatchesReference(*ops, WeightFormat::kBF16, ops->has_cublas());
  ExpectMatchesReference(*ops, WeightFormat::kF16, ops->has_cublas());
  ExpectMatchesReference(*ops, WeightFormat::kI8, false);  // never on cuBLAS
  // Back to exact on the same object: fp32 products match the reference tightly again.
  ops->set_tensor_core_matmul(false);
  ExpectMatchesReference(*ops, WeightFormat::kF32, ops->has_cublas());
}

TEST(CublasLinearTest, WithoutCublasOurKernelsComputeEveryProduct) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  std::string error;
  CudaOpsOptions options;
  options.cublas_library = "/nonexistent/libcublas.so.13";
  options.tensor_core_matmul = true;  // asks for nothing that our kernels cannot do exactly
  auto ops = CudaOps::Create(0, options, &error);
  ASSERT_NE(ops, nullptr) << error;
  EXPECT_FALSE(ops->has_cublas());
  EXPECT_NE(ops->cublas_status().find("/nonexistent/libcublas.so.13"), std::string::npos)
      << ops->cublas_status();
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kI8}) {
    ExpectMatchesReference(*ops, format, false);
  }
  ops->set_tensor_core_matmul(false);
  ExpectMatchesReference(*ops, WeightFormat::kF32, false);
}

// A refused product is reported like a refused launch, naming the op and cuBLAS's status, and
// the ops after it are skipped until Synchronize() clears it.
TEST(CublasLinearTest, ACublasFailureIsReportedAndCleared) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = testing::NewOps();
  ASSERT_NE(ops, nullptr);
  if (!ops->has_cublas()) GTEST_SKIP() << ops->cublas_status();
  const int64_t m = 32, k = 40, n = 24;
  const auto w = MakeWeights(WeightFormat::kF32, n, k, 5);
  auto dx = ToDevice(Rng(6).Uniform(m * k)), dy = ToDevice(std::vector<float>(m * n, 0.0f));
  // A row stride of x shorter than its rows: cuBLAS refuses (CUBLAS_STATUS_INVALID_VALUE).
  ops->Linear(dx.get(), k - 1, m, w->device, nullptr, dy.get(), n);
  const std::string failure = ops->Synchronize();
  EXPECT_NE(failure.find("Linear (cuBLAS"), std::string::npos) << failure;
  EXPECT_NE(failure.find("CUBLAS_STATUS"), std::string::npos) << failure;
  ops->Linear(dx.get(), k, m, w->device, nullptr, dy.get(), n);
  EXPECT_EQ(ops->Synchronize(), "");
}

}  // namespace
}  // namespace tandem::kernels::cuda
