// Helpers for the kernel tests: seeded random tensors and an element-wise closeness check that
// reports the first offending index.
#ifndef TANDEM_TESTS_KERNELS_TEST_UTIL_H_
#define TANDEM_TESTS_KERNELS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tandem::kernels::testing {

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  std::vector<float> Uniform(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen_);
    return v;
  }
  float Scalar(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }

 private:
  std::mt19937 gen_;
};

// |got − want| ≤ atol + rtol·|want| for every element, with NaN never close.
inline ::testing::AssertionResult AllClose(const float* got, const float* want, size_t n,
                                           float atol, float rtol) {
  for (size_t i = 0; i < n; ++i) {
    const float diff = std::fabs(got[i] - want[i]);
    if (!(diff <= atol + rtol * std::fabs(want[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want "
                                           << want[i] << " (diff " << diff << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult AllClose(const std::vector<float>& got,
                                           const std::vector<float>& want, float atol, float rtol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  }
  return AllClose(got.data(), want.data(), got.size(), atol, rtol);
}

// Compares only the [rows, cols] window of two buffers with row stride ld.
inline ::testing::AssertionResult AllCloseStrided(const std::vector<float>& got,
                                                  const std::vector<float>& want, int64_t rows,
                                                  int64_t cols, int64_t ld, float atol,
                                                  float rtol) {
  for (int64_t r = 0; r < rows; ++r) {
    auto res = AllClose(got.data() + r * ld, want.data() + r * ld, cols, atol, rtol);
    if (!res) return res << " in row " << r;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_KERNELS_TEST_UTIL_H_
