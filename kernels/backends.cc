#include "kernels/backends.h"

#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"

namespace tandem::kernels {

std::unique_ptr<Ops> MakeReferenceOps() { return std::make_unique<ReferenceOps>(); }

std::unique_ptr<Ops> MakeCpuOps(int threads, bool batch_invariant) {
  auto ops = std::make_unique<CpuOps>(threads);
  ops->set_batch_invariant(batch_invariant);
  return ops;
}

}  // namespace tandem::kernels
