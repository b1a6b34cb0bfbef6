// Factories for the compute backends behind kernels/ops.h. Callers depend on Ops only.
#ifndef TANDEM_KERNELS_BACKENDS_H_
#define TANDEM_KERNELS_BACKENDS_H_

#include <memory>

#include "kernels/ops.h"

namespace tandem::kernels {

// Plain single-threaded loops: the oracle for tests. Slow.
std::unique_ptr<Ops> MakeReferenceOps();

// The fast CPU backend. It owns a pool of `threads` threads (0 = all cores) that every op shares.
// One caller thread at a time: ops keep per-call scratch in the object, so concurrent callers
// need one CpuOps each. Creating one limits OpenBLAS to a single thread process-wide (CpuOps
// splits GEMMs over its own pool instead). `batch_invariant`: see CpuOps::set_batch_invariant.
std::unique_ptr<Ops> MakeCpuOps(int threads = 0, bool batch_invariant = false);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_BACKENDS_H_
