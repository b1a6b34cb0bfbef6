// The AVX2/FMA GEMM: register tiles of dot products over k with one horizontal sum per output.
// The fallback where AVX-512 is missing, compiled with function-level target attributes so that
// it exists whatever the build's -march. Weights in bf16, f16 or int8 are widened to fp32 in
// registers after the load (F16C for f16), so the arithmetic is the fp32 kernel's.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/gemm_kernels.h"

#ifdef TANDEM_GEMM_X86

#define TANDEM_AVX2 __attribute__((target("avx2,fma,f16c")))

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

template <WeightFormat F>
using Elem = std::conditional_t<F == WeightFormat::kF32, float,
                                std::conditional_t<F == WeightFormat::kI8, int8_t, uint16_t>>;

// 8 consecutive weights widened to fp32.
template <WeightFormat F>
TANDEM_AVX2 inline __m256 LoadWeights(const Elem<F>* w) {
  if constexpr (F == WeightFormat::kF32) {
    return _mm256_loadu_ps(w);
  } else if constexpr (F == WeightFormat::kI8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
    if constexpr (F == WeightFormat::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// The last `r` < 8 weights of a row, zero-padded to 8: AVX2 has masked loads for 32-bit lanes
// only, so narrower formats go through a small copy.
template <WeightFormat F>
TANDEM_AVX2 inline __m256 LoadWeightsTail(const Elem<F>* w, int64_t r, __m256i mask) {
  if constexpr (F == WeightFormat::kF32) {
    return _mm256_maskload_ps(w, mask);
  } else {
    Elem<F> padded[16] = {};
    std::memcpy(padded, w, static_cast<size_t>(r) * sizeof(Elem<F>));
    return LoadWeights<F>(padded);
  }
}

// out[i][j] = scale[j] · dot(x_i, w_j) (+ bias[j]) for an MR × NR tile (scale only for int8).
template <WeightFormat F, int MR, int NR>
TANDEM_AVX2 inline void Tile(const float* x, int64_t ld_x, const Elem<F>* w, int64_t k, float* y,
                             int64_t ld_y, const float* bias, const float* scale) {
  __m256 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = LoadWeights<F>(w + j * k + p);
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
    for (int j = 0; j < NR; ++j) wv[j] = LoadWeightsTail<F>(w + j * k + p, k - p, mask);
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
      float dot = HorizontalSum(acc[i][j]);
      if constexpr (F == WeightFormat::kI8) dot *= scale[j];
      y[i * ld_y + j] = dot + (bias != nullptr ? bias[j] : 0.0f);
    }
}

template <WeightFormat F, int MR>
TANDEM_AVX2 void RowTile(const float* x, int64_t ld_x, int64_t k, const Elem<F>* w,
                         const float* bias, const float* scale, int64_t n0, int64_t n1, float* y,
                         int64_t ld_y) {
  int64_t j = n0;
  for (; j + 3 <= n1; j += 3) {
    Tile<F, MR, 3>(x, ld_x, w + j * k, k, y + j, ld_y, bias ? bias + j : nullptr,
                   scale ? scale + j : nullptr);
  }
  for (; j < n1; ++j) {
    Tile<F, MR, 1>(x, ld_x, w + j * k, k, y + j, ld_y, bias ? bias + j : nullptr,
                   scale ? scale + j : nullptr);
  }
}

template <WeightFormat F>
TANDEM_AVX2 void Gemm(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& wm,
                      const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  const int64_t k = wm.cols;
  const Elem<F>* w = static_cast<const Elem<F>*>(wm.data);
  const float* scale = wm.row_scales;
  if (m == 1) {
    // One x row against eight w rows: the GEMV shape, memory bound, so many independent streams.
    int64_t j = n0;
    for (; j + 8 <= n1; j += 8) {
      Tile<F, 1, 8>(x, 0, w + j * k, k, y + j, 1, bias ? bias + j : nullptr,
                    scale ? scale + j : nullptr);
    }
    for (; j < n1; ++j) {
      Tile<F, 1, 1>(x, 0, w + j * k, k, y + j, 1, bias ? bias + j : nullptr,
                    scale ? scale + j : nullptr);
    }
    return;
  }
  // Blocks of w rows small enough to stay in L2 while every x row tile passes over them.
  const int64_t row_bytes = static_cast<int64_t>(sizeof(Elem<F>)) * std::max<int64_t>(k, 1);
  const int64_t kBlock = std::max<int64_t>(12, (192 * 1024 / row_bytes) / 3 * 3);
  for (int64_t jb = n0; jb < n1; jb += kBlock) {
    const int64_t je = std::min(n1, jb + kBlock);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      RowTile<F, 4>(x + i * ld_x, ld_x, k, w, bias, scale, jb, je, y + i * ld_y, ld_y);
    switch (m - i) {
      case 3:
        RowTile<F, 3>(x + i * ld_x, ld_x, k, w, bias, scale, jb, je, y + i * ld_y, ld_y);
        break;
      case 2:
        RowTile<F, 2>(x + i * ld_x, ld_x, k, w, bias, scale, jb, je, y + i * ld_y, ld_y);
        break;
      case 1:
        RowTile<F, 1>(x + i * ld_x, ld_x, k, w, bias, scale, jb, je, y + i * ld_y, ld_y);
        break;
      default:
        break;
    }
  }
}
}  // namespace

TANDEM_AVX2 void GemmNTAvx2(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                            const float* bias, int64_t n0, int64_t n1, float* y, int64_t ld_y) {
  switch (w.format) {
    case WeightFormat::kF32:
      return Gemm<WeightFormat::kF32>(x, ld_x, m, w, bias, n0, n1, y, ld_y);
    case WeightFormat::kBF16:
      return Gemm<WeightFormat::kBF16>(x, ld_x, m, w, bias, n0, n1, y, ld_y);
    case WeightFormat::kF16:
      return Gemm<WeightFormat::kF16>(x, ld_x, m, w, bias, n0, n1, y, ld_y);
    case WeightFormat::kI8:
      return Gemm<WeightFormat::kI8>(x, ld_x, m, w, bias, n0, n1, y, ld_y);
  }
}

}  // namespace tandem::kernels

#endif  // TANDEM_GEMM_X86
