// What the workers of a tensor-parallel model exchange during a forward pass
// (models/tensor_parallel.h): each holds a slice of every layer, and the partial sums of a
// sub-layer's output are added up across them. One Collectives object per worker; every worker
// of a group makes the same calls in the same order, with the same counts.
#ifndef TANDEM_KERNELS_COLLECTIVES_H_
#define TANDEM_KERNELS_COLLECTIVES_H_

#include <cstdint>

namespace tandem::kernels {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t ranks() const = 0;
  // data[0:count] (in the worker's backend memory) becomes the sum over the workers of their
  // data[0:count], added in rank order, so that every worker holds the same bits afterwards.
  virtual void AllReduceSum(float* data, int64_t count) = 0;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_COLLECTIVES_H_
