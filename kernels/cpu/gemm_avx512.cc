// AVX-512 small-M GEMM, the batched-decode shape: a few to a few dozen x rows against a weight
// matrix read from memory once per call. Weights are not packed: packing costs a full extra pass
// over them every call (what makes sgemm slow at small M), so the tiles read the [N, K] rows in
// place, 16 k-values per vector, and reduce the lanes once per tile at the end.
//
// Loop order: for each panel of kNR weight rows, every kMR-row tile of x runs over the panel. The
// panel then comes from memory once and from cache for the remaining x tiles, and the small x
// block is re-read from L1/L2. While a panel computes, its tiles prefetch the next panel between
// them, so that the memory stream keeps going during the compute instead of stalling the first
// tile of every panel.
//
// Weights in bf16, f16 or int8 are widened to fp32 in registers right after the load (a shift,
// vcvtph2ps, or a sign extension and conversion), so the arithmetic, and with it every result bit,
// is that of the fp32 kernel; only the bytes streamed from memory shrink. Int8 sums are scaled
// once per output, after the lane reduction.
//
// GCC 12's _mm512_undefined_ps() initialises a variable with itself, which -Wuninitialized
// reports at every shuffle (and -Wmaybe-uninitialized at the widening conversions); the value is
// never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>

#include "kernels/cpu/gemm_kernels.h"

#ifdef TANDEM_GEMM_X86

#define TANDEM_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c")))

namespace tandem::kernels {
namespace {

// 24 accumulators + 6 weight vectors + 1 x vector fill 31 of the 32 registers; 24 FMAs per 10
// loads keeps the FMA ports, not the load ports, the limit (8×3, 6×4 and 3×8 measured 5-20%
// slower). kNR divides the 24-column slices that CpuOps::Linear hands to each thread.
constexpr int kMR = 4;
constexpr int kNR = 6;

// Longest k run per tile, so that the panel (kNR rows of kc floats, 96 KiB) stays in L2 while the
// x tiles pass over it. Not smaller: splitting k turns each weight row into strided pieces that
// the hardware prefetchers follow worse (measured 1.1-1.2× slower at k = 3072 with kc = 1024).
constexpr int64_t kMaxKc = 4096;

// Prefill row counts (batch-invariant mode runs every Linear here) go in blocks of this many x
// rows: the block (32 rows × kc, 96 KiB at k = 768) stays in L2 while every weight panel passes
// over it, where the whole of x (1.5 MiB at 512 rows) was re-read from beyond L2 for every
// panel. Up to kRowBlockFrom rows, one block: batched decode must read its weights only once.
// Measured 1.3-1.6× faster at 512 rows (docs/BENCHMARKS.md, "Batch invariance").
constexpr int64_t kRowBlock = 32;
constexpr int64_t kRowBlockFrom = 64;

// Sums of each 256-bit half: lanes 0-7 hold 8 partials of a, lanes 8-15 8 partials of b.
TANDEM_AVX512 inline __m512 FoldHalves(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}

// Two FoldHalves results (vectors 0,1 and 2,3) to one whose 128-bit lane l holds 4 partials of
// vector l.
TANDEM_AVX512 inline __m512 FoldQuarters(__m512 s, __m512 t) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(s, t, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(s, t, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane j of the result = the sum of v[j]'s 16 lanes, for N ≤ 8 vectors. A shuffle tree: about
// 3 operations per vector instead of 8 for separate horizontal sums, and the shuffles compete
// with the FMAs for port 5.
template <int N>
TANDEM_AVX512 inline __m256 SumLanes(const __m512 (&v)[N]) {
  static_assert(N >= 1 && N <= 8);
  __m512 p[8];
  for (int j = 0; j < 8; ++j) p[j] = j < N ? v[j] : _mm512_setzero_ps();
  const __m512 q0 = FoldQuarters(FoldHalves(p[0], p[1]), FoldHalves(p[2], p[3]));
  const __m512 q1 =
      N > 4 ? FoldQuarters(FoldHalves(p[4], p[5]), FoldHalves(p[6], p[7])) : _mm512_setzero_ps();
  // Per 128-bit lane l: [2 partials of v_l, 2 partials of v_{4+l}].
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(q0, q1, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(q0, q1, _MM_SHUFFLE(3, 2, 3, 2)));
  // Per 128-bit lane l: [S_l, S_l, S_{4+l}, S_{4+l}].
  const __m512 s = _mm512_add_ps(r, _mm512_permute_ps(r, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, s));
}

// The element type each format is stored in.
template <WeightFormat F>
using Elem = std::conditional_t<F == WeightFormat::kF32, float,
                                std::conditional_t<F == WeightFormat::kI8, int8_t, uint16_t>>;

// 16 consecutive weights widened to fp32; `mask` (kMasked) limits the k tail.
template <WeightFormat F, bool kMasked>
TANDEM_AVX512 __attribute__((always_inline)) inline __m512 LoadWeights(const Elem<F>* w,
                                                                     __mmask16 mask) {
  if constexpr (F == WeightFormat::kF32) {
    return kMasked ? _mm512_maskz_loadu_ps(mask, w) : _mm512_loadu_ps(w);
  } else if constexpr (F == WeightFormat::kI8) {
    const __m128i q = kMasked ? _mm_maskz_loadu_epi8(mask, w)
                              : _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
  } else {
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(mask, w)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    if constexpr (F == WeightFormat::kF16) return _mm512_cvtph_ps(h);
    // bf16 is the top half of an fp32: shift it into place.
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// acc[i][j] += x_i[p:p+16] · w_j[p:p+16] lane-wise; `mask` limits the k tail.
template <WeightFormat F, int MR, int NR, bool kMasked>
TANDEM_AVX512 __attribute__((always_inline)) inline void Step(__m512 (&acc)[MR][NR], const float* x,
                                                              int64_t ld_x, const Elem<F>* w,
                                                              int64_t ld_w, __mmask16 mask) {
  __m512 wv[NR];
  for (int j = 0; j < NR; ++j) wv[j] = LoadWeights<F, kMasked>(w + j * ld_w, mask);
  for (int i = 0; i < MR; ++i) {
    const __m512 xv =
        kMasked ? _mm512_maskz_loadu_ps(mask, x + i * ld_x) : _mm512_loadu_ps(x + i * ld_x);
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
  }
}

// y[i][j] (+)= scale[j] · dot(x_i[0:kc], w_j[0:kc]) (+ bias[j]) for an MR × NR tile (scale only
// for int8). Each 64 bytes of weights a step passes also touch one cache line in each of pf_rows
// rows (pf_stride elements apart) of the next panel.
template <WeightFormat F, int MR, int NR>
TANDEM_AVX512 void Tile(const float* x, int64_t ld_x, const void* w_bytes, int64_t ld_w,
                        int64_t kc, float* y, int64_t ld_y, const float* bias, const float* scale,
                        bool accumulate, const void* pf_bytes, int64_t pf_stride, int pf_rows) {
  const Elem<F>* w = static_cast<const Elem<F>*>(w_bytes);
  const Elem<F>* pf = static_cast<const Elem<F>*>(pf_bytes);
  // Steps of 16 weights per cache line: 1 for fp32, 2 for 16-bit, 4 for int8.
  constexpr int64_t kStepsPerLine = 64 / (16 * sizeof(Elem<F>));
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t p = 0;
  if (pf_rows > 0) {
    for (; p + 16 <= kc; p += 16) {
      if ((p / 16) % kStepsPerLine == 0) {
        for (int r = 0; r < pf_rows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(pf + r * pf_stride + p), _MM_HINT_T0);
        }
      }
      Step<F, MR, NR, false>(acc, x + p, ld_x, w + p, ld_w, 0);
    }
  } else {
    for (; p + 16 <= kc; p += 16) Step<F, MR, NR, false>(acc, x + p, ld_x, w + p, ld_w, 0);
  }
  if (p < kc) {
    Step<F, MR, NR, true>(acc, x + p, ld_x, w + p, ld_w,
                          static_cast<__mmask16>((1u << (kc - p)) - 1));
  }
  const __mmask8 cols = static_cast<__mmask8>((1u << NR) - 1);
  const __m256 b = bias != nullptr ? _mm256_maskz_loadu_ps(cols, bias) : _mm256_setzero_ps();
  __m256 sc = _mm256_setzero_ps();
  if constexpr (F == WeightFormat::kI8) sc = _mm256_maskz_loadu_ps(cols, scale);
  for (int i = 0; i < MR; ++i) {
    __m256 dot = SumLanes<NR>(acc[i]);
    if constexpr (F == WeightFormat::kI8) dot = _mm256_mul_ps(dot, sc);
    __m256 s = _mm256_add_ps(dot, b);
    if (accumulate) s = _mm256_add_ps(s, _mm256_maskz_loadu_ps(cols, y + i * ld_y));
    _mm256_mask_storeu_ps(y + i * ld_y, cols, s);
  }
}

using TileFn = void (*)(const float*, int64_t, const void*, int64_t, int64_t, float*, int64_t,
                        const float*, const float*, bool, const void*, int64_t, int);
using TileTableT = std::array<std::array<TileFn, kNR>, kMR>;

template <WeightFormat F, int MR, int... NRs>
constexpr std::array<TileFn, sizeof...(NRs)> TileRow(std::integer_sequence<int, NRs...>) {
  return {&Tile<F, MR, NRs + 1>...};
}

// Table<F>()[mr - 1][nr - 1] handles the edges of m and of the slice without masks in the main
// loop.
template <WeightFormat F, int... MRs>
constexpr TileTableT TileTable(std::integer_sequence<int, MRs...>) {
  return {TileRow<F, MRs + 1>(std::make_integer_sequence<int, kNR>())...};
}

template <WeightFormat F>
constexpr TileTableT kTiles = TileTable<F>(std::make_integer_sequence<int, kMR>());

const TileTableT& TilesFor(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
      return kTiles<WeightFormat::kBF16>;
    case WeightFormat::kF16:
      return kTiles<WeightFormat::kF16>;
    case WeightFormat::kI8:
      return kTiles<WeightFormat::kI8>;
    case WeightFormat::kF32:
      break;
  }
  return kTiles<WeightFormat::kF32>;
}

}  // namespace

TANDEM_AVX512 void GemmNTAvx512(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                                const float* bias, int64_t n0, int64_t n1, float* y,
                                int64_t ld_y) {
  const int64_t k = w.cols;
  if (m <= 0 || n1 <= n0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = n0; j < n1; ++j) y[i * ld_y + j] = bias != nullptr ? bias[j] : 0.0f;
    return;
  }
  const TileTableT& tiles_for = TilesFor(w.format);
  const int64_t elem = static_cast<int64_t>(WeightElementBytes(w.format));
  const uint8_t* wb = static_cast<const uint8_t*>(w.data);
  // Equal k blocks, whole vectors where possible, so the masked step runs at most once per tile.
  // The same blocks for every format: the reduction order, and so the result, depends on k only.
  const int64_t blocks = (k + kMaxKc - 1) / kMaxKc;
  const int64_t kc = std::min(k, ((k + blocks - 1) / blocks + 15) / 16 * 16);
  const int64_t row_block = m <= kRowBlockFrom ? m : kRowBlock;
  for (int64_t r0 = 0; r0 < m; r0 += row_block) {
    const int64_t mrows = std::min(row_block, m - r0);
    const float* xb = x + r0 * ld_x;
    float* yb = y + r0 * ld_y;
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
      const int64_t kl = std::min(kc, k - k0);
      const bool accumulate = k0 > 0;
      const int64_t tiles = (mrows + kMR - 1) / kMR;
      for (int64_t j = n0; j < n1; j += kNR) {
        const int64_t nr = std::min<int64_t>(kNR, n1 - j);
        const uint8_t* wp = wb + (j * k + k0) * elem;
        const int64_t pf_panel = j + kNR;
        const int64_t pf_n = std::clamp<int64_t>(n1 - pf_panel, 0, kNR);
        const float* bp = !accumulate && bias != nullptr ? bias + j : nullptr;
        const float* sp = w.row_scales != nullptr ? w.row_scales + j : nullptr;
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t i = t * kMR;
          const int64_t mr = std::min<int64_t>(kMR, mrows - i);
          // Tile t prefetches rows t, t + tiles, … of a later panel: the memory stream runs at an
          // even rate through all the tiles instead of in a burst during the first.
          const int pf_rows = t < pf_n ? static_cast<int>((pf_n - t + tiles - 1) / tiles) : 0;
          const uint8_t* pf = pf_rows > 0 ? wb + ((pf_panel + t) * k + k0) * elem : nullptr;
          tiles_for[mr - 1][nr - 1](xb + i * ld_x + k0, ld_x, wp, k, kl, yb + i * ld_y + j, ld_y,
                                    bp, sp, accumulate, pf, tiles * k, pf_rows);
        }
      }
    }
  }
}

}  // namespace tandem::kernels

#endif  // TANDEM_GEMM_X86
