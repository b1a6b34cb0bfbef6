#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/gemm_kernels.h"

namespace tandem::kernels {

void GemmNTScalar(const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
                  const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = n0; j < n1; ++j) {
      float s = 0.0f;
      for (int64_t p = 0; p < k; ++p) s += x[i * ld_x + p] * w[j * k + p];
      y[i * ld_y + j] = s + (bias != nullptr ? bias[j] : 0.0f);
    }
  }
}

bool GemmIsaSupported(GemmIsa isa) {
#ifdef TANDEM_GEMM_X86
  // libgcc's check also asks the OS (XCR0) whether it saves the wider registers.
  switch (isa) {
    case GemmIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
    case GemmIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmIsa::kScalar:
      return true;
  }
  return false;
#else
  return isa == GemmIsa::kScalar;
#endif
}

GemmIsa BestGemmIsa() {
  static const GemmIsa best = GemmIsaSupported(GemmIsa::kAvx512) ? GemmIsa::kAvx512
                              : GemmIsaSupported(GemmIsa::kAvx2) ? GemmIsa::kAvx2
                                                                 : GemmIsa::kScalar;
  return best;
}

void OwnGemmNTWith(GemmIsa isa, const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
                   const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  switch (isa) {
#ifdef TANDEM_GEMM_X86
    case GemmIsa::kAvx512:
      GemmNTAvx512(x, ld_x, m, k, w, bias, n0, n1, y, ld_y);
      return;
    case GemmIsa::kAvx2:
      GemmNTAvx2(x, ld_x, m, k, w, bias, n0, n1, y, ld_y);
      return;
#endif
    default:
      GemmNTScalar(x, ld_x, m, k, w, bias, n0, n1, y, ld_y);
      return;
  }
}

void OwnGemmNT(const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
               const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  OwnGemmNTWith(BestGemmIsa(), x, ld_x, m, k, w, bias, n0, n1, y, ld_y);
}

void BlasGemmNT(const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
                const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  const int64_t n = n1 - n0;
  if (n <= 0) return;
  float beta = 0.0f;
  if (bias != nullptr) {
    for (int64_t i = 0; i < m; ++i) std::copy(bias + n0, bias + n1, y + i * ld_y + n0);
    beta = 1.0f;
  }
  if (m == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w + n0 * k, k, x, 1, beta, y + n0, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, ld_x, w + n0 * k, k,
                beta, y + n0, ld_y);
  }
}

void BlasSgemmNT(int64_t m, int64_t n, int64_t k, const float* a, int64_t ld_a, const float* b,
                 int64_t ld_b, float beta, float* c, int64_t ld_c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, ld_a, b, ld_b, beta, c,
              ld_c);
}

void BlasSgemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t ld_a, const float* b,
                 int64_t ld_b, float beta, float* c, int64_t ld_c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, ld_a, b, ld_b, beta, c,
              ld_c);
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace tandem::kernels
