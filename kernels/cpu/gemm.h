// Single-threaded GEMM kernels for y[:, n0:n1] = x · w[n0:n1]ᵀ + bias[n0:n1] with PyTorch's
// [out, in] weight layout (both operands contiguous along k = w.cols), for weights in any
// WeightFormat. CpuOps::Linear splits the output columns over its thread pool and calls one of
// these per slice.
#ifndef TANDEM_KERNELS_CPU_GEMM_H_
#define TANDEM_KERNELS_CPU_GEMM_H_

#include <cstdint>

#include "kernels/weight_matrix.h"

namespace tandem::kernels {

// Our own kernel, for the small row counts of batched decode: reads the weights in place (no
// packing), AVX-512 where the CPU has it, else AVX2/FMA, else plain loops (chosen at run time).
// 16-bit and int8 weights are widened in registers; the reduction order is the same for every
// format, so bf16/f16 weights give bit-for-bit the results of the same values in fp32.
void OwnGemmNT(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
               int64_t n0, int64_t n1, float* y, int64_t ld_y);

// The instruction sets OwnGemmNT can run on; tests and benchmarks force one to cover the
// fallbacks on a machine that has a better one.
enum class GemmIsa { kScalar, kAvx2, kAvx512 };
bool GemmIsaSupported(GemmIsa isa);
#if defined(__x86_64__) || defined(__i386__)
// The CPU converts between fp16 and fp32 in hardware (F16C; implied by kAvx2 support).
bool CpuHasF16c();
#endif
GemmIsa BestGemmIsa();  // what OwnGemmNT uses
// OwnGemmNT on the given instruction set, which must be supported.
void OwnGemmNTWith(GemmIsa isa, const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                   const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y);

// OpenBLAS sgemm (sgemv when m == 1) on the same slice. Weights not in fp32 are widened into a
// per-thread buffer a panel of rows at a time first (worth it for the prefill row counts this
// path serves). The caller must have limited OpenBLAS to one thread (see CpuOps) so that its
// threads and ours do not oversubscribe the cores.
void BlasGemmNT(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
                int64_t n0, int64_t n1, float* y, int64_t ld_y);

// Plain single-threaded sgemm shapes for kernels that are not a Linear (attention tiles):
//   NT: c[m,n] = a[m,k]·b[n,k]ᵀ + beta·c        NN: c[m,n] = a[m,k]·b[k,n] + beta·c
void BlasSgemmNT(int64_t m, int64_t n, int64_t k, const float* a, int64_t ld_a, const float* b,
                 int64_t ld_b, float beta, float* c, int64_t ld_c);
void BlasSgemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t ld_a, const float* b,
                 int64_t ld_b, float beta, float* c, int64_t ld_c);

// Limits OpenBLAS's own threading (process-wide).
void SetBlasThreads(int threads);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_GEMM_H_
