// The greedy choice over a row of logits, defined once: the host sampler and every backend's
// argmax read-back (Ops::ReadBackArgmax) must give exactly this index.
#ifndef TANDEM_KERNELS_ARGMAX_H_
#define TANDEM_KERNELS_ARGMAX_H_

#include <cstdint>

namespace tandem::kernels {

// The index of the largest value of row[0, cols), the lowest on ties. It is what a left-to-right
// scan that moves only to a strictly larger value gives, so NaN entries are passed over, except
// that a row whose first value is NaN gives 0. A parallel reduction reproduces it by skipping
// NaN and keeping the lower index on ties, after checking row[0].
inline int32_t ArgmaxRow(const float* row, int64_t cols) {
  int32_t best = 0;
  for (int64_t i = 1; i < cols; ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_ARGMAX_H_
