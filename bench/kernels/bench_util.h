// Shared by the kernel benchmarks: the thread count (TANDEM_KERNEL_THREADS, default 0 = all
// cores) and seeded random tensors.
#ifndef TANDEM_BENCH_KERNELS_BENCH_UTIL_H_
#define TANDEM_BENCH_KERNELS_BENCH_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

namespace tandem::kernels::bench {

inline int ThreadsFromEnv() {
  const char* v = std::getenv("TANDEM_KERNEL_THREADS");
  return v != nullptr ? std::atoi(v) : 0;
}

inline std::vector<float> Random(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

}  // namespace tandem::kernels::bench

#endif  // TANDEM_BENCH_KERNELS_BENCH_UTIL_H_
