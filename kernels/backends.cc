#include "kernels/backends.h"

#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"

namespace tandem::kernels {

std::unique_ptr<Ops> MakeReferenceOps() { return std::make_unique<ReferenceOps>(); }

std::unique_ptr<Ops> MakeCpuOps(int threads) { return std::make_unique<CpuOps>(threads); }

}  // namespace tandem::kernels
