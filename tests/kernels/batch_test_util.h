// What the batched-call tests (decode batches, varlen calls) share: the host backends, and
// sequences' states scattered in their blocks the way Ops::Table hands them to the kernels.
#ifndef TANDEM_TESTS_KERNELS_BATCH_TEST_UTIL_H_
#define TANDEM_TESTS_KERNELS_BATCH_TEST_UTIL_H_

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::testing {

// R sequences' states, each `floats` long at `offset` inside its own block, the blocks in a
// shuffled order: what Ops::Table hands the kernels on the host.
struct ScatteredStates {
  static constexpr int64_t kOffset = 5;
  // The same seed gives the same contents and order.
  ScatteredStates(int64_t rows, int64_t floats, uint32_t seed)
      : floats(floats), block(floats + kOffset + 3), memory(rows * block) {
    Rng rng(seed);
    memory = rng.Uniform(rows * block);
    std::vector<int64_t> order(rows);
    std::iota(order.begin(), order.end(), 0);
    std::reverse(order.begin(), order.end());
    if (rows > 2) std::swap(order[0], order[rows / 2]);
    for (int64_t r = 0; r < rows; ++r) table.push_back(memory.data() + order[r] * block);
  }
  float* state(int64_t r) { return table[r] + kOffset; }
  int64_t floats, block;
  std::vector<float> memory;
  std::vector<float*> table;
};

inline std::vector<std::unique_ptr<Ops>> HostBackends() {
  std::vector<std::unique_ptr<Ops>> backends;
  backends.push_back(std::make_unique<ReferenceOps>());
  backends.push_back(std::make_unique<CpuOps>(2));
  return backends;
}

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_KERNELS_BATCH_TEST_UTIL_H_
