#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TANDEM_GEMM_AVX2 1
#endif

namespace tandem::kernels {
namespace {

#ifdef TANDEM_GEMM_AVX2
inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Mask with the first `r` of 8 lanes set, for the k tail.
inline __m256i TailMask(int64_t r) {
  alignas(32) static const int32_t kTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                 0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTable + 8 - r));
}

// out[i][j] = dot(x_i, w_j) for an MR × NR tile.
template <int MR, int NR>
inline void Tile(const float* x, int64_t ld_x, const float* w, int64_t k, float* y, int64_t ld_y,
                 const float* bias) {
  __m256 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_loadu_ps(w + j * k + p);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ld_x + p);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (p < k) {
    const __m256i mask = TailMask(k - p);
    __m256 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_maskload_ps(w + j * k + p, mask);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_maskload_ps(x + i * ld_x + p, mask);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
      y[i * ld_y + j] = HorizontalSum(acc[i][j]) + (bias != nullptr ? bias[j] : 0.0f);
    }
}

// One x row against eight w rows: the GEMV shape, memory bound, so many independent streams.
inline void Row8(const float* x, const float* w, int64_t k, float* y, const float* bias) {
  Tile<1, 8>(x, 0, w, k, y, 1, bias);
}

template <int MR>
void RowTile(const float* x, int64_t ld_x, int64_t k, const float* w, const float* bias, int64_t n0,
             int64_t n1, float* y, int64_t ld_y) {
  int64_t j = n0;
  for (; j + 3 <= n1; j += 3) {
    Tile<MR, 3>(x, ld_x, w + j * k, k, y + j, ld_y, bias ? bias + j : nullptr);
  }
  for (; j < n1; ++j) Tile<MR, 1>(x, ld_x, w + j * k, k, y + j, ld_y, bias ? bias + j : nullptr);
}
#endif

}  // namespace

void OwnGemmNT(const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
               const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
#ifdef TANDEM_GEMM_AVX2
  if (m == 1) {
    int64_t j = n0;
    for (; j + 8 <= n1; j += 8) Row8(x, w + j * k, k, y + j, bias ? bias + j : nullptr);
    for (; j < n1; ++j) Tile<1, 1>(x, 0, w + j * k, k, y + j, 1, bias ? bias + j : nullptr);
    return;
  }
  // Blocks of w rows small enough to stay in L2 while every x row tile passes over them.
  const int64_t kBlock =
      std::max<int64_t>(12, (192 * 1024 / (4 * std::max<int64_t>(k, 1))) / 3 * 3);
  for (int64_t jb = n0; jb < n1; jb += kBlock) {
    const int64_t je = std::min(n1, jb + kBlock);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      RowTile<4>(x + i * ld_x, ld_x, k, w, bias, jb, je, y + i * ld_y, ld_y);
    switch (m - i) {
      case 3:
        RowTile<3>(x + i * ld_x, ld_x, k, w, bias, jb, je, y + i * ld_y, ld_y);
        break;
      case 2:
        RowTile<2>(x + i * ld_x, ld_x, k, w, bias, jb, je, y + i * ld_y, ld_y);
        break;
      case 1:
        RowTile<1>(x + i * ld_x, ld_x, k, w, bias, jb, je, y + i * ld_y, ld_y);
        break;
      default:
        break;
    }
  }
#else
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = n0; j < n1; ++j) {
      float s = 0.0f;
      for (int64_t p = 0; p < k; ++p) s += x[i * ld_x + p] * w[j * k + p];
      y[i * ld_y + j] = s + (bias != nullptr ? bias[j] : 0.0f);
    }
  }
#endif
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
