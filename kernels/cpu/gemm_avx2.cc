// The AVX2/FMA GEMM: register tiles of dot products over k with one horizontal sum per output.
// The fallback where AVX-512 is missing, compiled with function-level target attributes so that
// it exists whatever the build's -march.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/gemm_kernels.h"

#ifdef TANDEM_GEMM_X86

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem::kernels {
namespace {

TANDEM_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Mask with the first `r` of 8 lanes set, for the k tail.
TANDEM_AVX2 inline __m256i TailMask(int64_t r) {
  alignas(32) static const int32_t kTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                 0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTable + 8 - r));
}

// out[i][j] = dot(x_i, w_j) for an MR × NR tile.
template <int MR, int NR>
TANDEM_AVX2 inline void Tile(const float* x, int64_t ld_x, const float* w, int64_t k, float* y,
                             int64_t ld_y, const float* bias) {
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
TANDEM_AVX2 inline void Row8(const float* x, const float* w, int64_t k, float* y,
                             const float* bias) {
  Tile<1, 8>(x, 0, w, k, y, 1, bias);
}

template <int MR>
TANDEM_AVX2 void RowTile(const float* x, int64_t ld_x, int64_t k, const float* w, const float* bias,
                         int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  int64_t j = n0;
  for (; j + 3 <= n1; j += 3) {
    Tile<MR, 3>(x, ld_x, w + j * k, k, y + j, ld_y, bias ? bias + j : nullptr);
  }
  for (; j < n1; ++j) Tile<MR, 1>(x, ld_x, w + j * k, k, y + j, ld_y, bias ? bias + j : nullptr);
}
}  // namespace

TANDEM_AVX2 void GemmNTAvx2(const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
                            const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
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
}

}  // namespace tandem::kernels

#endif  // TANDEM_GEMM_X86
