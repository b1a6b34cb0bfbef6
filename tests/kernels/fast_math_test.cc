#include "kernels/cpu/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::kernels {
namespace {

TEST(FastMathTest, ExpIsWithinFewUlpOverTheRange) {
  double worst = 0.0;
  for (float x = -87.0f; x < 88.5f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    const double rel = std::fabs(FastExp(x) - want) / want;
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 4e-7);  // ~3 ulp
}

TEST(FastMathTest, ExpLimits) {
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_EQ(FastExp(-100.0f), 0.0f);
  EXPECT_EQ(FastExp(-INFINITY), 0.0f);
  EXPECT_EQ(FastExp(100.0f), INFINITY);
  EXPECT_NEAR(FastExp(88.5f), std::exp(88.5f), std::exp(88.5f) * 1e-6);
}

TEST(FastMathTest, SiluMatchesDefinition) {
  for (float x : {-90.0f, -20.0f, -1.0f, 0.0f, 0.5f, 3.0f, 50.0f}) {
    EXPECT_NEAR(FastSilu(x), x / (1.0f + std::exp(-x)), 1e-6f * (1.0f + std::fabs(x))) << x;
  }
}

TEST(FastMathTest, LogIsAccurate) {
  double worst = 0.0;
  for (float y = 1e-30f; y < 1e30f; y *= 1.0137f) {
    const double want = std::log(static_cast<double>(y));
    worst = std::max(worst, std::fabs(FastLog(y) - want) / std::max(1.0, std::fabs(want)));
  }
  EXPECT_LT(worst, 4e-7);
}

TEST(FastMathTest, SoftplusMatchesTorchDefinition) {
  double worst = 0.0;
  for (float x = -80.0f; x < 30.0f; x += 0.00731f) {
    const double want = x > 20.0f ? x : std::log1p(std::exp(static_cast<double>(x)));
    worst = std::max(worst, std::fabs(FastSoftplus(x) - want) / want);
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(FastSoftplus(25.0f), 25.0f);
}

}  // namespace
}  // namespace tandem::kernels
