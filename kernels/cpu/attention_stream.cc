// The online softmax of attention_stream.h, for one query at a time and for many in vector lanes.
// This file is compiled with -ffp-contract=off (kernels/CMakeLists.txt): every product and sum is
// rounded as written, so the two kernels' arithmetic is what the code says, not what the
// compiler chose to fuse in each.
#include "kernels/cpu/attention_stream.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// Builds without AVX-512 pass 16-float vectors between these internal functions in memory rather
// than registers; nothing outside this file sees that calling convention.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tandem::kernels {
namespace {

constexpr int kLanes = 16;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using V16 = float __attribute__((vector_size(64)));
using I16 = int32_t __attribute__((vector_size(64)));

#if defined(__AVX512F__)
inline float Fma(float a, float b, float c) { return std::fma(a, b, c); }
inline V16 Fma(V16 a, V16 b, V16 c) {
  return std::bit_cast<V16>(_mm512_fmadd_ps(std::bit_cast<__m512>(a), std::bit_cast<__m512>(b),
                                            std::bit_cast<__m512>(c)));
}
#else
inline float Fma(float a, float b, float c) { return a * b + c; }
inline V16 Fma(V16 a, V16 b, V16 c) { return a * b + c; }
#endif

inline V16 Splat(float x) { return V16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
inline V16 Load16(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store16(V16 v, float* p) { std::memcpy(p, &v, sizeof(v)); }

// std::max's rule, lane by lane: b where a < b, else a.
inline float Max(float a, float b) { return a < b ? b : a; }
inline V16 Select(I16 take_a, V16 a, V16 b) {
  return std::bit_cast<V16>((take_a & std::bit_cast<I16>(a)) | (~take_a & std::bit_cast<I16>(b)));
}
inline V16 Max(V16 a, V16 b) { return Select(a < b, b, a); }

// FastExp (cpu/fast_math.h) on 16 lanes, step for step. Both kernels take every exp from here,
// a lone one from lane 0 of a splat, so that no exp depends on how a compiler vectorised a loop.
inline V16 Exp(V16 x) {
  const V16 lo = Splat(-87.3f), hi = Splat(88.7f);
  const V16 xc = Select(x < lo, lo, Select(x > hi, hi, x));
  const V16 n = (xc * Splat(1.44269504088896341f) + Splat(12582912.0f)) - Splat(12582912.0f);
  V16 r = xc - n * Splat(0.693145751953125f);
  r = r - n * Splat(1.42860682030941723212e-6f);
  V16 p = Splat(1.0f / 720.0f);
  p = p * r + Splat(1.0f / 120.0f);
  p = p * r + Splat(1.0f / 24.0f);
  p = p * r + Splat(1.0f / 6.0f);
  p = p * r + Splat(0.5f);
  p = p * r + Splat(1.0f);
  p = p * r + Splat(1.0f);
  const I16 ni = __builtin_convertvector(n, I16);
  const I16 n1 = ni >> 1, n2 = ni - n1;
  const V16 s1 = std::bit_cast<V16>((n1 + 127) << 23);
  const V16 s2 = std::bit_cast<V16>((n2 + 127) << 23);
  V16 result = p * s1 * s2;
  result = Select(x < lo, V16{}, result);
  return Select(x > hi, Splat(std::numeric_limits<float>::infinity()), result);
}
inline float Exp(float x) { return Exp(Splat(x))[0]; }

// Tree16 of attention_stream.h over x[0 … 16): of floats, or of 16 lanes at once. Every tree of
// both kernels but the AVX-512 Dot's shuffles (the same sums, across one register) is this one.
template <typename T>
inline T Tree16(const T* x) {
  T b[4];
  for (int l = 0; l < 4; ++l) b[l] = (x[l] + x[l + 8]) + (x[l + 4] + x[l + 12]);
  return (b[0] + b[2]) + (b[1] + b[3]);
}

// Dot(q, k) of attention_stream.h.
#if defined(__AVX512F__)
inline float Dot(const float* q, const float* k, int64_t dh) {
  __m512 p = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + kLanes <= dh; d += kLanes) {
    p = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(k + d), p);
  }
  if (d < dh) {  // the lanes past head_dim keep their chains as they are
    const __mmask16 m = static_cast<__mmask16>((1u << (dh - d)) - 1);
    p = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), _mm512_maskz_loadu_ps(m, k + d), p,
                              m);
  }
  // Tree16 by halving: lane l gains lane l + 8, then l + 4, l + 2, l + 1.
  V16 t = std::bit_cast<V16>(p);
  t = t + __builtin_shufflevector(t, t, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  t = t + __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  t = t + __builtin_shufflevector(t, t, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  t = t + __builtin_shufflevector(t, t, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  return t[0];
}
#else
inline float Dot(const float* q, const float* k, int64_t dh) {
  float p[kLanes] = {};
  for (int64_t d = 0; d < dh; d += kLanes) {
    const int64_t n = std::min<int64_t>(kLanes, dh - d);
    for (int64_t l = 0; l < n; ++l) p[l] = Fma(q[d + l], k[d + l], p[l]);
  }
  return Tree16(p);
}
#endif

// The shared kernel's register tiles. Rows sit in the lanes of R vectors (R ≤ 4); qt[r·dh + d]
// holds their query element d and acc[r·dh + d] their output's.
//
// Scores of K keys (rows of `keys`, head_dim dh apart) for the R row vectors: s[k·R + r] =
// Dot · scale. Lane chain l of every (key, row vector) runs in one register tile, K·R
// accumulators fed by R loads and K broadcasts per step; the chains then sum as Tree16 from
// `chains` (16·K·R vectors of scratch).
template <int K, int R>
void ScoreKeys(const V16* qt, int64_t dh, const float* keys, V16 scale, V16* chains, V16* s) {
  for (int64_t l = 0; l < kLanes; ++l) {
    V16 acc[K][R] = {};
    for (int64_t d = l; d < dh; d += kLanes) {
      V16 q[R];
      for (int r = 0; r < R; ++r) q[r] = qt[r * dh + d];
      for (int k = 0; k < K; ++k) {
        const V16 kd = Splat(keys[k * dh + d]);
        for (int r = 0; r < R; ++r) acc[k][r] = Fma(q[r], kd, acc[k][r]);
      }
    }
    for (int k = 0; k < K; ++k) {
      for (int r = 0; r < R; ++r) chains[(l * K + k) * R + r] = acc[k][r];
    }
  }
  for (int k = 0; k < K; ++k) {
    for (int r = 0; r < R; ++r) {
      V16 x[kLanes];
      for (int64_t l = 0; l < kLanes; ++l) x[l] = chains[(l * K + k) * R + r];
      s[k * R + r] = Tree16(x) * scale;
    }
  }
}

// acc = acc·correction, then acc = fma(p_i, v_i, acc) for the n keys in order, p[i·R + r] the
// weights of key i for row vector r. Tiles of 4 head dims × R vectors stay in registers across
// the keys: R loads and 4 broadcasts per key feed 4·R products.
template <int R>
void AccumulateValues(V16* acc, int64_t dh, const V16* p, int64_t n, const float* values,
                      const V16* correction) {
  int64_t d = 0;
  for (; d + 4 <= dh; d += 4) {
    V16 a[4][R];
    for (int j = 0; j < 4; ++j) {
      for (int r = 0; r < R; ++r) a[j][r] = acc[r * dh + d + j] * correction[r];
    }
    for (int64_t i = 0; i < n; ++i) {
      V16 pr[R];
      for (int r = 0; r < R; ++r) pr[r] = p[i * R + r];
      for (int j = 0; j < 4; ++j) {
        const V16 vd = Splat(values[i * dh + d + j]);
        for (int r = 0; r < R; ++r) a[j][r] = Fma(pr[r], vd, a[j][r]);
      }
    }
    for (int j = 0; j < 4; ++j) {
      for (int r = 0; r < R; ++r) acc[r * dh + d + j] = a[j][r];
    }
  }
  for (; d < dh; ++d) {
    for (int r = 0; r < R; ++r) {
      V16 a = acc[r * dh + d] * correction[r];
      for (int64_t i = 0; i < n; ++i) a = Fma(p[i * R + r], Splat(values[i * dh + d]), a);
      acc[r * dh + d] = a;
    }
  }
}

// One tile of n ≤ 16 keys for the R row vectors: the step of attention_stream.h, lane by lane.
// s and chains are scratch (16·R and 64·R vectors).
template <int R>
void SharedTile(const V16* qt, V16* acc, V16* mx, V16* sum, int64_t dh, const float* keys,
                const float* values, int64_t n, V16 scale, V16* s, V16* chains) {
  for (int64_t k0 = 0; k0 < n; k0 += 4) {
    const float* kp = keys + k0 * dh;
    V16* sp = s + k0 * R;
    switch (std::min<int64_t>(4, n - k0)) {
      case 1:
        ScoreKeys<1, R>(qt, dh, kp, scale, chains, sp);
        break;
      case 2:
        ScoreKeys<2, R>(qt, dh, kp, scale, chains, sp);
        break;
      case 3:
        ScoreKeys<3, R>(qt, dh, kp, scale, chains, sp);
        break;
      default:
        ScoreKeys<4, R>(qt, dh, kp, scale, chains, sp);
        break;
    }
  }
  V16 correction[R];
  for (int r = 0; r < R; ++r) {
    V16 tile_max = Splat(kNegInf);
    for (int64_t i = 0; i < n; ++i) tile_max = Max(tile_max, s[i * R + r]);
    const V16 new_max = Max(mx[r], tile_max);
    correction[r] = Exp(mx[r] - new_max);
    mx[r] = new_max;
    V16 p[kLanes];
    for (int64_t i = 0; i < n; ++i) p[i] = s[i * R + r] = Exp(s[i * R + r] - new_max);
    for (int64_t i = n; i < kLanes; ++i) p[i] = V16{};
    sum[r] = sum[r] * correction[r] + Tree16(p);
  }
  AccumulateValues<R>(acc, dh, s, n, values, correction);
}

// Calls fn(page, first key in the page, keys) for each tile of [begin, end).
template <typename Fn>
void ForEachTile(const PagedKv& kv, int64_t begin, int64_t end, Fn&& fn) {
  const int64_t pt = kv.page_tokens;
  for (int64_t page = begin / pt; page * pt < end; ++page) {
    const int64_t hi = std::min(pt, end - page * pt);
    for (int64_t t = std::max<int64_t>(begin - page * pt, 0); t < hi; t += kLanes) {
      fn(page, t, std::min<int64_t>(kLanes, hi - t));
    }
  }
}

int64_t RoundToLanes(int64_t floats) { return (floats + kLanes - 1) / kLanes * kLanes; }

}  // namespace

int64_t StreamGroupScratch(int32_t group, int64_t head_dim) {
  return RoundToLanes(int64_t{group} * (head_dim + 2));
}

void StartGroup(GroupState state, int32_t group, int64_t head_dim) {
  std::fill(state.acc, state.acc + group * head_dim, 0.0f);
  std::fill(state.max, state.max + group, kNegInf);
  std::fill(state.sum, state.sum + group, 0.0f);
}

void AdvanceGroup(const float* q, int32_t group, const PagedKv& kv, int32_t j, int64_t key_begin,
                  int64_t key_end, float scale, GroupState state) {
  const int64_t dh = kv.head_dim;
  ForEachTile(kv, key_begin, key_end, [&](int64_t page, int64_t first, int64_t n) {
    const float* __restrict kb = kv.k_block(page, j) + first * dh;
    const float* __restrict vb = kv.v_block(page, j) + first * dh;
    for (int32_t gi = 0; gi < group; ++gi) {
      const float* __restrict qg = q + int64_t{gi} * dh;
      float s[kLanes], p[kLanes];
      float tile_max = kNegInf;
      for (int64_t i = 0; i < n; ++i) {
        s[i] = Dot(qg, kb + i * dh, dh) * scale;
        tile_max = Max(tile_max, s[i]);
      }
      const float new_max = Max(state.max[gi], tile_max);
      const float correction = Exp(state.max[gi] - new_max);  // 0 on the first tile
      state.max[gi] = new_max;
      for (int64_t i = 0; i < kLanes; ++i) p[i] = i < n ? s[i] - new_max : kNegInf;  // exp → 0
      Store16(Exp(Load16(p)), p);
      state.sum[gi] = state.sum[gi] * correction + Tree16(p);
      float* __restrict acc = state.acc + gi * dh;
      for (int64_t d = 0; d < dh; ++d) acc[d] = acc[d] * correction;
      for (int64_t i = 0; i < n; ++i) {
        const float* __restrict vr = vb + i * dh;
        const float pi = p[i];
        for (int64_t d = 0; d < dh; ++d) acc[d] = Fma(pi, vr[d], acc[d]);
      }
    }
  });
}

void NormaliseGroup(GroupState state, int32_t group, int64_t head_dim, float* out) {
  for (int32_t gi = 0; gi < group; ++gi) {
    const float inv = 1.0f / state.sum[gi];
    const float* __restrict acc = state.acc + gi * head_dim;
    float* __restrict o = out + gi * head_dim;
    for (int64_t d = 0; d < head_dim; ++d) o[d] = acc[d] * inv;
  }
}

GroupState StreamGroup(const float* q, int32_t group, const PagedKv& kv, int32_t j,
                       int64_t key_begin, int64_t key_end, float scale, float* scratch) {
  const GroupState state{scratch, scratch + group * kv.head_dim,
                         scratch + group * kv.head_dim + group};
  StartGroup(state, group, kv.head_dim);
  AdvanceGroup(q, group, kv, j, key_begin, key_end, scale, state);
  return state;
}

int64_t SharedRowsScratch(int64_t rows, int64_t head_dim) {
  const int64_t vectors = (rows + kLanes - 1) / kLanes;
  // Qᵀ and accᵀ (head_dim vectors each per row vector), max, sum, a tile's scores and the
  // score tiles' lane chains.
  return (vectors * (2 * head_dim + 2) + kLanes * 4 + kLanes * 16) * kLanes;
}

void AdvanceSharedRows(const SharedRows& r, const PagedKv& kv, int32_t j, int64_t key_begin,
                       int64_t key_end, float scale, bool start, float* scratch) {
  const int64_t dh = kv.head_dim;
  const int64_t vectors = (r.rows + kLanes - 1) / kLanes;
  V16* qt = reinterpret_cast<V16*>(scratch);  // [vectors][dh]
  V16* acc = qt + vectors * dh;               // [vectors][dh]
  V16* mx = acc + vectors * dh;               // [vectors]
  V16* sum = mx + vectors;                    // [vectors]
  V16* s = sum + vectors;                     // [16][≤ 4]: a tile's scores, then exps
  V16* chains = s + kLanes * 4;               // [16][4][≤ 4]

  auto row_offset = [&](int64_t row, int64_t ld) {
    return row / r.group * ld + (r.head0 + row % r.group) * dh;
  };
  auto row_head = [&](int64_t row) { return row / r.group * r.state.ld + r.head0 + row % r.group; };
  // Into lanes: rows past the last are zero queries with an empty state (their lanes compute
  // harmless finite values that are never stored).
  for (int64_t v = 0; v < vectors; ++v) {
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      const int64_t row = v * kLanes + lane;
      const bool real = row < r.rows;
      const float* qr = real ? r.q + row_offset(row, r.ld_q) : nullptr;
      const float* ar = real ? r.state.acc + row_offset(row, r.state.ld_acc) : nullptr;
      for (int64_t d = 0; d < dh; ++d) {
        qt[v * dh + d][lane] = real ? qr[d] : 0.0f;
        acc[v * dh + d][lane] = real && !start ? ar[d] : 0.0f;
      }
      mx[v][lane] = real && !start ? r.state.max[row_head(row)] : kNegInf;
      sum[v][lane] = real && !start ? r.state.sum[row_head(row)] : 0.0f;
    }
  }

  const V16 scale_v = Splat(scale);
  ForEachTile(kv, key_begin, key_end, [&](int64_t page, int64_t first, int64_t n) {
    const float* kb = kv.k_block(page, j) + first * dh;
    const float* vb = kv.v_block(page, j) + first * dh;
    for (int64_t v = 0; v < vectors; v += 4) {  // register tiles of up to 4 row vectors
      const V16* q = qt + v * dh;
      V16* a = acc + v * dh;
      switch (std::min<int64_t>(4, vectors - v)) {
        case 1:
          SharedTile<1>(q, a, mx + v, sum + v, dh, kb, vb, n, scale_v, s, chains);
          break;
        case 2:
          SharedTile<2>(q, a, mx + v, sum + v, dh, kb, vb, n, scale_v, s, chains);
          break;
        case 3:
          SharedTile<3>(q, a, mx + v, sum + v, dh, kb, vb, n, scale_v, s, chains);
          break;
        default:
          SharedTile<4>(q, a, mx + v, sum + v, dh, kb, vb, n, scale_v, s, chains);
          break;
      }
    }
  });

  for (int64_t row = 0; row < r.rows; ++row) {
    const int64_t v = row / kLanes, lane = row % kLanes;
    float* ar = r.state.acc + row_offset(row, r.state.ld_acc);
    for (int64_t d = 0; d < dh; ++d) ar[d] = acc[v * dh + d][lane];
    r.state.max[row_head(row)] = mx[v][lane];
    r.state.sum[row_head(row)] = sum[v][lane];
  }
}

}  // namespace tandem::kernels
