#include "kernels/cpu/gemm.h"

#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <vector>

#include "kernels/cpu/gemm_kernels.h"

namespace tandem::kernels {

void GemmNTScalar(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
                  int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  const int64_t k = w.cols;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(k));
  for (int64_t j = n0; j < n1; ++j) {
    // Int8 rows are summed unscaled and scaled once, as the vector kernels do.
    const float scale = w.format == WeightFormat::kI8 ? w.row_scales[j] : 1.0f;
    if (w.format == WeightFormat::kI8) {
      const int8_t* q = reinterpret_cast<const int8_t*>(w.bytes_at(j));
      for (int64_t p = 0; p < k; ++p) row[p] = static_cast<float>(q[p]);
    } else {
      DequantizeRows(w, j, j + 1, row.data());
    }
    for (int64_t i = 0; i < m; ++i) {
      float s = 0.0f;
      for (int64_t p = 0; p < k; ++p) s += x[i * ld_x + p] * row[p];
      y[i * ld_y + j] = scale * s + (bias != nullptr ? bias[j] : 0.0f);
    }
  }
}

#ifdef TANDEM_GEMM_X86
bool CpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool GemmIsaSupported(GemmIsa isa) {
#ifdef TANDEM_GEMM_X86
  // libgcc's check also asks the OS (XCR0) whether it saves the wider registers.
  switch (isa) {
    case GemmIsa::kAvx512:
      // BW for the masked 8/16-bit loads of the narrow weight formats' k tails.
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("fma");
    case GemmIsa::kAvx2:
      // F16C widens f16 weights (asked of cpuid: clang's __builtin_cpu_supports has no "f16c").
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuHasF16c();
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

void OwnGemmNTWith(GemmIsa isa, const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                   const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  switch (isa) {
#ifdef TANDEM_GEMM_X86
    case GemmIsa::kAvx512:
      GemmNTAvx512(x, ld_x, m, w, bias, n0, n1, y, ld_y);
      return;
    case GemmIsa::kAvx2:
      GemmNTAvx2(x, ld_x, m, w, bias, n0, n1, y, ld_y);
      return;
#endif
    default:
      GemmNTScalar(x, ld_x, m, w, bias, n0, n1, y, ld_y);
      return;
  }
}

void OwnGemmNT(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
               int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  OwnGemmNTWith(BestGemmIsa(), x, ld_x, m, w, bias, n0, n1, y, ld_y);
}

namespace {

// Weight rows widened per sgemm call when the weights are not fp32: 96 × k floats (1.5 MiB at
// k = 4096) per thread, enough columns for sgemm's packed kernel to run at full speed.
constexpr int64_t kWidenRows = 96;

void BlasGemmF32(const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
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

}  // namespace

void BlasGemmNT(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
                int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  const int64_t k = w.cols;
  if (w.format == WeightFormat::kF32) {
    BlasGemmF32(x, ld_x, m, k, w.f32(), bias, n0, n1, y, ld_y);
    return;
  }
  // Grown once per pool thread to its largest panel, then reused: no allocation in steady state.
  thread_local std::vector<float> widened;
  widened.resize(static_cast<size_t>(std::min(kWidenRows, std::max<int64_t>(n1 - n0, 0)) * k));
  for (int64_t j0 = n0; j0 < n1; j0 += kWidenRows) {
    const int64_t j1 = std::min(n1, j0 + kWidenRows);
    DequantizeRows(w, j0, j1, widened.data());
    // The panel is a weight matrix of its own whose row j0 is row 0: shift y and bias to match.
    BlasGemmF32(x, ld_x, m, k, widened.data(), bias != nullptr ? bias + j0 : nullptr, 0, j1 - j0,
                y + j0, ld_y);
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
