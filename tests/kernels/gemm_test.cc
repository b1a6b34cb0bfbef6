// OwnGemmNT on every instruction set this CPU has (the AVX2 and scalar fallbacks forced on an
// AVX-512 machine), against a double-precision loop: every row count of batched decode, k and
// n that are not multiples of the vector or tile widths, k longer than one cache block, bias,
// strided x and y, and column slices as CpuOps::Linear hands them to its threads.
#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels {
namespace {

using testing::Rng;

std::string IsaName(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512:
      return "Avx512";
    case GemmIsa::kAvx2:
      return "Avx2";
    case GemmIsa::kScalar:
      return "Scalar";
  }
  return "?";
}

struct Problem {
  int64_t m, k, n;
  int64_t ld_x, ld_y;
  int64_t n0, n1;
  bool bias;
};

// Runs `p` on `isa` and checks every output element, and that y outside the slice is untouched.
::testing::AssertionResult Check(GemmIsa isa, const Problem& p, uint32_t seed) {
  Rng rng(seed);
  const std::vector<float> x = rng.Uniform(p.m * p.ld_x), w = rng.Uniform(p.n * p.k),
                           b = rng.Uniform(p.n);
  const float sentinel = 1234.5f;
  std::vector<float> y(p.m * p.ld_y, sentinel);
  OwnGemmNTWith(isa, x.data(), p.ld_x, p.m, WeightMatrix::F32(w.data(), p.n, p.k),
                p.bias ? b.data() : nullptr, p.n0, p.n1, y.data(), p.ld_y);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.ld_y; ++j) {
      const float got = y[i * p.ld_y + j];
      if (j < p.n0 || j >= p.n1) {
        if (got != sentinel) {
          return ::testing::AssertionFailure()
                 << "wrote outside the slice at row " << i << " column " << j;
        }
        continue;
      }
      double want = p.bias ? b[j] : 0.0, mag = std::fabs(want);
      for (int64_t q = 0; q < p.k; ++q) {
        want += double{x[i * p.ld_x + q]} * w[j * p.k + q];
        mag += std::fabs(double{x[i * p.ld_x + q]} * w[j * p.k + q]);
      }
      // Float accumulation in any order: error bounded by k·ε·Σ|terms|, far below it in practice.
      const double tol = 1e-6 + 4e-7 * std::sqrt(double(p.k) + 1) * mag;
      if (!(std::fabs(got - want) <= tol)) {
        return ::testing::AssertionFailure()
               << "m=" << p.m << " k=" << p.k << " n=" << p.n << " [" << p.n0 << ", " << p.n1
               << ") y[" << i << "][" << j << "] = " << got << ", want " << want;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

class GemmIsaTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    if (!GemmIsaSupported(GetParam())) GTEST_SKIP() << "this CPU lacks " << IsaName(GetParam());
  }
};

TEST_P(GemmIsaTest, EveryRowCountUpTo64) {
  // k: below one vector, odd, and just past the widths; n: tile edges of every width.
  for (int64_t m = 1; m <= 64; ++m) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{3, 7}, {37, 13}, {96, 24}, {161, 31}}) {
      ASSERT_TRUE(Check(GetParam(), {m, k, n, k, n, 0, n, m % 2 == 0}, 100 * m + k));
    }
  }
}

TEST_P(GemmIsaTest, LongKAcrossCacheBlocks) {
  // Past 4096 the AVX-512 kernel splits k and accumulates the blocks in y.
  for (int64_t k : {1023, 1025, 3072, 4097, 8200}) {
    for (int64_t m : {1, 2, 5, 16}) {
      ASSERT_TRUE(Check(GetParam(), {m, k, 19, k, 19, 0, 19, true}, k + m));
    }
  }
}

TEST_P(GemmIsaTest, StridesAndSlices) {
  for (int64_t m : {1, 3, 4, 9, 17, 33, 64}) {
    // x and y rows wider than the problem, and a slice that starts mid-row, as the thread split
    // in CpuOps::Linear does.
    ASSERT_TRUE(Check(GetParam(), {m, 53, 50, 61, 57, 24, 47, true}, m));
    ASSERT_TRUE(Check(GetParam(), {m, 48, 72, 51, 80, 48, 72, false}, m + 1));
    ASSERT_TRUE(Check(GetParam(), {m, 17, 5, 17, 9, 3, 4, true}, m + 2));
  }
}

TEST_P(GemmIsaTest, EmptyK) {
  ASSERT_TRUE(Check(GetParam(), {3, 0, 7, 1, 7, 0, 7, true}, 1));
  ASSERT_TRUE(Check(GetParam(), {3, 0, 7, 1, 7, 0, 7, false}, 2));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GemmIsaTest,
                         ::testing::Values(GemmIsa::kAvx512, GemmIsa::kAvx2, GemmIsa::kScalar),
                         [](const auto& info) { return IsaName(info.param); });

// Batch invariance (CpuOps::set_batch_invariant): a row's output is the same bits whatever other
// rows share the call, where it sits in the register tiles, how the columns are sliced, and
// whether k spans several cache blocks — for every instruction set's kernel.
TEST_P(GemmIsaTest, ARowsResultDoesNotDependOnTheOtherRows) {
  Rng rng(31);
  for (const int64_t k : {int64_t{200}, int64_t{4100}}) {
    const int64_t n = 75;
    const std::vector<float> w = rng.Uniform(n * k), b = rng.Uniform(n);
    const std::vector<float> x = rng.Uniform(70 * k);
    const WeightMatrix weights = WeightMatrix::F32(w.data(), n, k);
    std::vector<float> alone(70 * n);
    for (int64_t i = 0; i < 70; ++i) {
      OwnGemmNTWith(GetParam(), x.data() + i * k, k, 1, weights, b.data(), 0, n,
                    alone.data() + i * n, n);
    }
    for (const int64_t m : {int64_t{2}, int64_t{3}, int64_t{5}, int64_t{16}, int64_t{41},
                            int64_t{70}}) {
      for (const int64_t row0 : {int64_t{0}, int64_t{70} - m}) {
        std::vector<float> y(m * n);
        // Columns in two slices cut off the tile width, as a thread split may cut them.
        OwnGemmNTWith(GetParam(), x.data() + row0 * k, k, m, weights, b.data(), 0, 29, y.data(), n);
        OwnGemmNTWith(GetParam(), x.data() + row0 * k, k, m, weights, b.data(), 29, n, y.data(), n);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_EQ(y[i * n + j], alone[(row0 + i) * n + j])
                << "k=" << k << " m=" << m << " row " << row0 + i << " column " << j;
          }
        }
      }
    }
  }
}

TEST(GemmDispatchTest, BestIsaIsSupported) {
  EXPECT_TRUE(GemmIsaSupported(BestGemmIsa()));
  EXPECT_TRUE(GemmIsaSupported(GemmIsa::kScalar));
}

// CpuOps::Linear with the automatic choice (own kernel, OpenBLAS sgemv or sgemm by row count) and
// its column split over threads, at every decode row count.
TEST(GemmDispatchTest, LinearAutoMatchesOwnAtEveryRowCount) {
  CpuOps cpu(2);
  Rng rng(7);
  const int64_t k = 200, n = 517;
  const std::vector<float> w = rng.Uniform(n * k), b = rng.Uniform(n);
  for (int64_t m = 1; m <= 80; m += (m < 64 ? 1 : 8)) {
    const std::vector<float> x = rng.Uniform(m * k);
    std::vector<float> auto_y(m * n), own_y(m * n);
    cpu.set_gemm_impl(GemmImpl::kAuto);
    cpu.Linear(x.data(), k, m, WeightMatrix::F32(w.data(), n, k), b.data(), auto_y.data(), n);
    cpu.set_gemm_impl(GemmImpl::kOwn);
    cpu.Linear(x.data(), k, m, WeightMatrix::F32(w.data(), n, k), b.data(), own_y.data(), n);
    ASSERT_TRUE(testing::AllClose(auto_y, own_y, 1e-4f, 1e-4f)) << "m=" << m;
  }
}

// In batch-invariant mode Linear gives a row the same bits at every row count, including one row
// (where the fast mode uses sgemv) and many (sgemm).
TEST(GemmDispatchTest, BatchInvariantLinearIsBitIdenticalAtEveryRowCount) {
  CpuOps cpu(2);
  cpu.set_batch_invariant(true);
  Rng rng(9);
  const int64_t k = 300, n = 517;
  const std::vector<float> w = rng.Uniform(n * k), b = rng.Uniform(n);
  const std::vector<float> x = rng.Uniform(130 * k);
  std::vector<float> first(n);
  cpu.Linear(x.data(), k, 1, WeightMatrix::F32(w.data(), n, k), b.data(), first.data(), n);
  for (const int64_t m : {int64_t{1}, int64_t{2}, int64_t{17}, int64_t{40}, int64_t{41},
                          int64_t{130}}) {
    std::vector<float> y(m * n);
    cpu.Linear(x.data(), k, m, WeightMatrix::F32(w.data(), n, k), b.data(), y.data(), n);
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(y[j], first[j]) << "m=" << m << " column " << j;
  }
}

}  // namespace
}  // namespace tandem::kernels
