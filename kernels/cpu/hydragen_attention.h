// Hydragen's prefix attention on CPU (CpuOps::SharedPrefixAttention) with a choice of kernel, so
// that tests and benchmarks can run each implementation on a machine that has the better one.
#ifndef TANDEM_KERNELS_CPU_HYDRAGEN_ATTENTION_H_
#define TANDEM_KERNELS_CPU_HYDRAGEN_ATTENTION_H_

#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"

namespace tandem::kernels {

enum class SharedPrefixImpl {
  kAuto,    // kAvx512 where the CPU has it, else kBlas
  kBlas,    // per K/V chunk: gather out of the pages, OpenBLAS S = Q·Kᵀ, softmax, O += P·V
  kAvx512,  // our fused kernel: products read the pages in place, rows of Q in vector lanes
};

bool SharedPrefixImplSupported(SharedPrefixImpl impl);

// SharedPrefixAttention on `pool` with the given implementation, which must be supported.
void SharedPrefixAttentionWith(SharedPrefixImpl impl, ThreadPool& pool,
                               const SharedPrefixAttentionArgs& args, Workspace& ws);

// The two implementations (cpu_shared_prefix_attention.cc, hydragen_avx512.cc). They expect
// rows > 0 and a non-empty key range; SharedPrefixAttentionWith handles the rest.
void SharedPrefixAttentionBlas(ThreadPool& pool, const SharedPrefixAttentionArgs& args,
                               Workspace& ws);
void SharedPrefixAttentionAvx512(ThreadPool& pool, const SharedPrefixAttentionArgs& args,
                                 Workspace& ws);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_HYDRAGEN_ATTENTION_H_
