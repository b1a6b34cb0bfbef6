// The instruction-set variants behind OwnGemmNT (gemm.h), one file each. Every variant computes
// the same slice y[:, n0:n1] = x · w[n0:n1]ᵀ + bias[n0:n1] for weights in any format, int8 as
// scale[j] · Σ x·q + bias[j]; each is compiled with function-level target attributes, so all of
// them exist in every x86-64 build whatever -march says, and OwnGemmNT picks one at run time.
// Call a variant directly only where the CPU supports it.
#ifndef TANDEM_KERNELS_CPU_GEMM_KERNELS_H_
#define TANDEM_KERNELS_CPU_GEMM_KERNELS_H_

#include <cstdint>

#include "kernels/weight_matrix.h"

namespace tandem::kernels {

void GemmNTScalar(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
                  int64_t n0, int64_t n1, float* y, int64_t ld_y);

#if defined(__x86_64__) || defined(__i386__)
#define TANDEM_GEMM_X86 1
void GemmNTAvx2(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
                int64_t n0, int64_t n1, float* y, int64_t ld_y);
void GemmNTAvx512(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
                  int64_t n0, int64_t n1, float* y, int64_t ld_y);
#endif

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_GEMM_KERNELS_H_
