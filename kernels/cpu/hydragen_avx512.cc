// Hydragen's prefix attention (docs/ARCHITECTURE.md, "Hydragen") as one fused AVX-512 kernel. For
// each kv head j the decode rows of every sequence × every query head of the GQA group form a row
// block, and the block attends to the shared keys chunk by chunk with an online softmax, as in the
// BLAS path (cpu_shared_prefix_attention.cc). What differs is the layout: the block's rows sit in
// the vector lanes of every operand (Qᵀ [head_dim, rows], Sᵀ [keys, rows], Oᵀ [head_dim, rows]), so
//   * both products take their K and V operands as scalars broadcast straight out of the
//     16-token pages: no chunk of K or V is copied, and no GEMM packs them,
//   * the query block is transposed once per task instead of packed by every sgemm call,
//   * the softmax's maxima, sums and rescaling are plain vertical vector operations (one lane
//     per row): no horizontal reductions, and the rescale of the accumulator by the running-max
//     correction happens as the PV tile loads it.
// Only the final normalisation transposes Oᵀ back into the [rows, heads·head_dim] output.
//
// Every function that uses AVX-512 carries a target attribute, so the kernel exists in every
// x86-64 build whatever -march says; SharedPrefixAttentionWith calls it only where the CPU
// supports it.
//
// GCC 12's _mm512_undefined_ps() (behind _mm512_roundscale_ps and _mm512_maskz_scalef_ps)
// initialises a variable with itself, which -W(maybe-)uninitialized reports; it is never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/hydragen_attention.h"

#ifdef TANDEM_GEMM_X86

#define TANDEM_HYDRAGEN_TARGET target("avx512f,avx512vl,avx512dq,avx2,fma")
// A profiling build may define this as TANDEM_HYDRAGEN_TARGET plus noinline, to see the tiles
// and the softmax as separate functions.
#ifndef TANDEM_HYDRAGEN_AVX512
#define TANDEM_HYDRAGEN_AVX512 __attribute__((TANDEM_HYDRAGEN_TARGET))
#endif
#define TANDEM_HYDRAGEN_INLINE __attribute__((TANDEM_HYDRAGEN_TARGET, always_inline)) inline

namespace tandem::kernels {
namespace {

constexpr int kLanes = 16;
// Register tiles: 8 keys (QK) or 8 head dims (PV) × 3 row vectors = 24 accumulators, plus 3 row
// operands and a broadcast: 28 of the 32 vector registers. Per step 24 FMAs against 3 vector
// loads and 8 broadcasts. Fewer broadcasts for more vector loads (4 keys × 6 vectors) measured
// ~15% slower on Zen 4; 8 × 2 and 8 × 4 (for QK) about the same.
constexpr int kKeyTile = 8;
constexpr int kDimTile = 8;
// Keys per chunk (one online-softmax step). The chunk's scores Sᵀ take kChunkKeys × rows floats
// (128 KiB at 256 rows) and sit in L2 beside Qᵀ, Oᵀ and the chunk's K and V pages; longer chunks
// make the per-chunk costs (cmax reset, softmax correction, loading and storing the Oᵀ tiles)
// smaller. 64, 128 and 256 measured within 2% of each other.
constexpr int64_t kChunkKeys = 128;
// Cache lines of the next chunk prefetched after each register tile: 16 covers a chunk's 2048
// lines (K and V, 128 keys × 512 bytes each) in about the first 60% of the chunk's ~190 tiles at
// 256 rows. Spreading them out inside the tiles' loops instead (one every 4-16 steps) measured
// 2-5% slower.
constexpr int64_t kPrefetchLines = 16;
static_assert(kChunkKeys % kKeyTile == 0);
// Rows per block: Qᵀ and Oᵀ of 256 rows × head_dim 128 are 128 KiB each.
constexpr int64_t kMaxRowBlock = 256;
// Tasks per thread (kv head × row block × key split): on cores shared with other processes a
// thread that loses its core must not hold the others up. 2, 4, 8 and 16 measured the same with
// this kernel (2 threads, batch 64 × 4K, load ~8).
constexpr int64_t kTasksPerThread = 8;
// A key split shorter than this costs more in its merge than it gains in parallelism.
constexpr int64_t kMinSplitKeys = 512;
// At most this many key splits per unit (the normalisation keeps a weight vector per split).
constexpr int64_t kMaxSplits = 64;

// exp(x) for x ≤ 0 (a score minus its row's running maximum, or an old maximum minus a new one,
// −inf included), 16 lanes: exp(x) = 2^n · exp(r), n = round(x / ln 2), exp(r) by the degree-6
// polynomial of FastExp. 2^n for n ∈ [−126, 0] is a normal float; below −87.3 the result is 0.
TANDEM_HYDRAGEN_INLINE __m512 ExpNonPositive(__m512 x) {
  const __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  // "Not less than" rather than "greater or equal": a NaN score stays NaN, as in FastExp.
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);
  return _mm512_maskz_scalef_ps(live, p, n);
}

// Software prefetch of the next chunk's K and V rows, a few cache lines after every register tile,
// so that the chunk is in cache when its products start (measured 8% faster: 47 → 43.5 ms for
// batch 64 × 4K on one thread). The hardware prefetchers do not cover this: a 16-token page block
// of one kv head is 8 KiB, two 4 KiB pages that they do not cross, and a tile reads 8 key rows of
// 512 bytes side by side, each too short a stream to be detected. _MM_HINT_T0 and _T1 measured
// the same.
class NextChunkPrefetch {
 public:
  NextChunkPrefetch(const PagedKv& kv, int32_t j) : kv_(kv), j_(j) {
    lines_per_row_ = (int64_t{kv.head_dim} * sizeof(float) + 63) / 64;
  }
  // The next chunk: keys [begin, end); its K rows first, then its V rows.
  void Reset(int64_t begin, int64_t end) {
    begin_ = begin;
    rows_ = std::max<int64_t>(end - begin, 0);
    row_ = 0;
    line_ = 0;
  }
  int64_t lines() const { return 2 * rows_ * lines_per_row_; }
  // Prefetches the next line. The row's address is computed once per row (it costs a
  // division), not per line.
  void IssueOne() {
    if (row_ >= 2 * rows_) return;
    if (line_ == 0) {
      const bool values = row_ >= rows_;
      const int64_t key = begin_ + (values ? row_ - rows_ : row_);
      const int64_t page = key / kv_.page_tokens;
      row_ptr_ = reinterpret_cast<const char*>(
          (values ? kv_.v_block(page, j_) : kv_.k_block(page, j_)) +
          (key - page * kv_.page_tokens) * kv_.head_dim);
    }
    _mm_prefetch(row_ptr_ + line_ * 64, _MM_HINT_T0);
    if (++line_ == lines_per_row_) {
      line_ = 0;
      ++row_;
    }
  }
  void Issue(int64_t count) {
    for (; count > 0; --count) IssueOne();
  }

 private:
  const PagedKv& kv_;
  int32_t j_;
  int64_t lines_per_row_, begin_ = 0, rows_ = 0, row_ = 0, line_ = 0;
  const char* row_ptr_ = nullptr;
};

// Sᵀ[i][rows] = Σ_d k_i[d] · Qᵀ[d][rows] for the 8 keys k_i = k + i·dh and NV row vectors;
// cmax[rows] = max(cmax, Sᵀ[i][rows]) over the first `valid` keys (the rest are padding).
template <int NV>
TANDEM_HYDRAGEN_AVX512 void ScoreTile(const float* qt, int64_t ld_qt, const float* k, int64_t dh,
                                      int valid, float* s, int64_t ld_s, float* cmax) {
  __m512 acc[kKeyTile][NV];
  for (int i = 0; i < kKeyTile; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  // do-while: dh ≥ 1, and a loop that might not run makes GCC keep a copy of acc on the stack.
  int64_t d = 0;
  do {
    __m512 q[NV];
    for (int v = 0; v < NV; ++v) q[v] = _mm512_loadu_ps(qt + d * ld_qt + v * kLanes);
    for (int i = 0; i < kKeyTile; ++i) {
      const __m512 kb = _mm512_set1_ps(k[i * dh + d]);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(q[v], kb, acc[i][v]);
    }
  } while (++d < dh);
  for (int v = 0; v < NV; ++v) {
    __m512 m = _mm512_loadu_ps(cmax + v * kLanes);
    for (int i = 0; i < kKeyTile; ++i) {
      if (i < valid) m = _mm512_max_ps(m, acc[i][v]);
    }
    _mm512_storeu_ps(cmax + v * kLanes, m);
  }
  for (int i = 0; i < kKeyTile; ++i) {
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(s + i * ld_s + v * kLanes, acc[i][v]);
  }
}

// Row vectors per tile for the next tile of `left` row vectors: 3 (the register budget), but
// 4 as 2 + 2 and never a lone 1 after 3s, since one-vector tiles do 8 FMAs per 8 broadcasts.
inline int TileVecs(int64_t left) { return left == 4 ? 2 : static_cast<int>(std::min<int64_t>(left, 3)); }

// Scores of one row group (NV row vectors) against a chunk of n keys, whose 8-key tiles start at
// ktiles[t]. The row group's slice of Qᵀ (head_dim × NV vectors, ≤ 24 KiB) can stay in L1 while
// the chunk's keys pass over it (key tiles outermost measured the same on Zen 4).
template <int NV>
TANDEM_HYDRAGEN_AVX512 void ScoreRowGroup(const float* qt, int64_t ld_qt,
                                          const float* const* ktiles, int64_t n, int64_t dh,
                                          float* s, int64_t ld_s, float* cmax,
                                          NextChunkPrefetch& pf) {
  for (int64_t t = 0; t * kKeyTile < n; ++t) {
    const int valid = static_cast<int>(std::min<int64_t>(kKeyTile, n - t * kKeyTile));
    ScoreTile<NV>(qt, ld_qt, ktiles[t], dh, valid, s + t * kKeyTile * ld_s, ld_s, cmax);
    pf.Issue(kPrefetchLines);
  }
}

TANDEM_HYDRAGEN_AVX512 void ScoreChunk(const float* qt, int64_t ld_qt, const float* const* ktiles,
                                       int64_t n, int64_t dh, float* s, int64_t ld_s, float* cmax,
                                       int64_t vecs, NextChunkPrefetch& pf) {
  for (int64_t v = 0; v < vecs;) {
    const int w = TileVecs(vecs - v);
    const int64_t o = v * kLanes;
    if (w == 3) {
      ScoreRowGroup<3>(qt + o, ld_qt, ktiles, n, dh, s + o, ld_s, cmax + o, pf);
    } else if (w == 2) {
      ScoreRowGroup<2>(qt + o, ld_qt, ktiles, n, dh, s + o, ld_s, cmax + o, pf);
    } else {
      ScoreRowGroup<1>(qt + o, ld_qt, ktiles, n, dh, s + o, ld_s, cmax + o, pf);
    }
    v += w;
  }
}

// Oᵀ[d0 + i][rows] = corr[rows] · Oᵀ[d0 + i][rows] + Σ_key V[key][d0 + i] · P[key][rows] for
// MD head dims and NV row vectors; `first` starts from zero (Oᵀ is not yet written).
template <int MD, int NV>
TANDEM_HYDRAGEN_AVX512 void ValueTile(const float* p, int64_t ld_p, const float* const* vrows,
                                      int64_t n, int64_t d0, const float* corr, bool first,
                                      float* ot, int64_t ld_o) {
  __m512 acc[MD][NV];
  if (first) {
    for (int i = 0; i < MD; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  } else {
    for (int v = 0; v < NV; ++v) {
      const __m512 c = _mm512_loadu_ps(corr + v * kLanes);
      for (int i = 0; i < MD; ++i) {
        acc[i][v] = _mm512_mul_ps(c, _mm512_loadu_ps(ot + (d0 + i) * ld_o + v * kLanes));
      }
    }
  }
  for (int64_t key = 0; key < n; ++key) {
    __m512 pv[NV];
    for (int v = 0; v < NV; ++v) pv[v] = _mm512_loadu_ps(p + key * ld_p + v * kLanes);
    const float* vr = vrows[key] + d0;
    for (int i = 0; i < MD; ++i) {
      const __m512 vb = _mm512_set1_ps(vr[i]);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(pv[v], vb, acc[i][v]);
    }

  }
  for (int i = 0; i < MD; ++i) {
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(ot + (d0 + i) * ld_o + v * kLanes, acc[i][v]);
  }
}

// ValueTile over all head dims of one row group (NV row vectors): the group's slice of P
// (n keys × NV vectors, ≤ 24 KiB) stays in L1 across the head-dim tiles.
template <int NV>
TANDEM_HYDRAGEN_AVX512 void ValueRowGroup(const float* p, int64_t ld_p, const float* const* vrows,
                                          int64_t n, int64_t dh, const float* corr, bool first,
                                          float* ot, int64_t ld_o, NextChunkPrefetch& pf) {
  int64_t d0 = 0;
  for (; d0 + kDimTile <= dh; d0 += kDimTile) {
    ValueTile<kDimTile, NV>(p, ld_p, vrows, n, d0, corr, first, ot, ld_o);
    pf.Issue(kPrefetchLines);
  }
  for (; d0 < dh; ++d0) ValueTile<1, NV>(p, ld_p, vrows, n, d0, corr, first, ot, ld_o);
}

TANDEM_HYDRAGEN_AVX512 void ValueChunk(const float* p, int64_t ld_p, const float* const* vrows,
                                       int64_t n, int64_t dh, const float* corr, bool first,
                                       float* ot, int64_t ld_o, int64_t vecs,
                                       NextChunkPrefetch& pf) {
  for (int64_t v = 0; v < vecs;) {
    const int w = TileVecs(vecs - v);
    const int64_t o = v * kLanes;
    if (w == 3) {
      ValueRowGroup<3>(p + o, ld_p, vrows, n, dh, corr + o, first, ot + o, ld_o, pf);
    } else if (w == 2) {
      ValueRowGroup<2>(p + o, ld_p, vrows, n, dh, corr + o, first, ot + o, ld_o, pf);
    } else {
      ValueRowGroup<1>(p + o, ld_p, vrows, n, dh, corr + o, first, ot + o, ld_o, pf);
    }
    v += w;
  }
}

// Online-softmax step over a chunk of n keys: for each row, new max m' = max(m, chunk max),
// corr = exp(m − m'), P = exp(S − m') in place, sum = sum·corr + Σ P.
TANDEM_HYDRAGEN_AVX512 void SoftmaxChunk(float* s, int64_t ld_s, int64_t n, int64_t vecs,
                                         const float* cmax, float* mx, float* sum, float* corr) {
  for (int64_t v = 0; v < vecs; ++v) {
    const int64_t o = v * kLanes;
    const __m512 m_old = _mm512_loadu_ps(mx + o);
    const __m512 m_new = _mm512_max_ps(m_old, _mm512_loadu_ps(cmax + o));
    const __m512 c = ExpNonPositive(_mm512_sub_ps(m_old, m_new));
    _mm512_storeu_ps(mx + o, m_new);
    _mm512_storeu_ps(corr + o, c);
    // Two partial sums: the adds would otherwise chain one exp to the next.
    __m512 t0 = _mm512_setzero_ps(), t1 = _mm512_setzero_ps();
    int64_t key = 0;
    for (; key + 2 <= n; key += 2) {
      float* r0 = s + key * ld_s + o;
      float* r1 = r0 + ld_s;
      const __m512 p0 = ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(r0), m_new));
      const __m512 p1 = ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(r1), m_new));
      _mm512_storeu_ps(r0, p0);
      _mm512_storeu_ps(r1, p1);
      t0 = _mm512_add_ps(t0, p0);
      t1 = _mm512_add_ps(t1, p1);
    }
    if (key < n) {
      float* r0 = s + key * ld_s + o;
      const __m512 p0 = ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(r0), m_new));
      _mm512_storeu_ps(r0, p0);
      t0 = _mm512_add_ps(t0, p0);
    }
    const __m512 total = _mm512_fmadd_ps(_mm512_loadu_ps(sum + o), c, _mm512_add_ps(t0, t1));
    _mm512_storeu_ps(sum + o, total);
  }
}

struct Layout {
  int64_t dh, rpad, vecs;  // head dim, rows padded to whole vectors, row vectors
};

// One task: kv head j, `nr` rows whose query rows are `qrows` (already including the head
// offset), keys [k0, k1). Leaves Oᵀ [dh, rpad] unnormalised, the running max and sum per row.
// `slot` is the calling participant's scratch.
TANDEM_HYDRAGEN_AVX512 void RunTask(const SharedPrefixAttentionArgs& a, const Layout& l, int32_t j,
                                    const float* const* qrows, int64_t nr, int64_t k0, int64_t k1,
                                    float* slot, float* ot, float* mx, float* sum) {
  const PagedKv& kv = a.kv;
  const int64_t dh = l.dh, rpad = l.rpad, vecs = l.vecs, pt = kv.page_tokens;
  float* qt = slot;                        // [dh, rpad]
  float* s = qt + dh * rpad;               // [kChunkKeys, rpad]
  float* cmax = s + kChunkKeys * rpad;     // [rpad]
  float* corr = cmax + rpad;               // [rpad]
  float* kcopy = corr + rpad;              // [kChunkKeys, dh], tiles that need a copy
  const float* ktiles[kChunkKeys / kKeyTile];
  const float* vrows[kChunkKeys];

  // Qᵀ, pre-scaled; padding rows are zero (their scores are computed and never read). The first
  // chunk's K and V are fetched meanwhile.
  NextChunkPrefetch pf(kv, j);
  pf.Reset(k0, std::min(k1, k0 + kChunkKeys));
  const int64_t first_lines = (pf.lines() + nr - 1) / nr;
  for (int64_t r = 0; r < nr; ++r) {
    const float* src = qrows[r];
    for (int64_t d = 0; d < dh; ++d) qt[d * rpad + r] = src[d] * a.scale;
    pf.Issue(first_lines);
  }
  for (int64_t d = 0; d < dh; ++d) std::fill(qt + d * rpad + nr, qt + d * rpad + rpad, 0.0f);
  std::fill(mx, mx + rpad, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + rpad, 0.0f);

  for (int64_t c0 = k0; c0 < k1; c0 += kChunkKeys) {
    const int64_t n = std::min(kChunkKeys, k1 - c0);
    pf.Reset(c0 + n, std::min(k1, c0 + n + kChunkKeys));
    std::fill(cmax, cmax + rpad, -std::numeric_limits<float>::infinity());
    for (int64_t t = 0; t < n; t += kKeyTile) {
      const int valid = static_cast<int>(std::min<int64_t>(kKeyTile, n - t));
      const int64_t key = c0 + t, page = key / pt, off = key % pt;
      if (valid == kKeyTile && off + kKeyTile <= pt) {
        ktiles[t / kKeyTile] = kv.k_block(page, j) + off * dh;  // within one page: in place
        continue;
      }
      // Spans a page boundary (pages not a multiple of 8 tokens, or an unaligned range) or is the
      // range's ragged end: copy its keys, zero-padded, into one contiguous tile.
      float* tile = kcopy + t * dh;
      for (int i = 0; i < kKeyTile; ++i) {
        float* dst = tile + i * dh;
        if (i < valid) {
          const int64_t ki = key + i;
          std::memcpy(dst, kv.k_block(ki / pt, j) + (ki % pt) * dh, dh * sizeof(float));
        } else {
          std::fill(dst, dst + dh, 0.0f);
        }
      }
      ktiles[t / kKeyTile] = tile;
    }
    ScoreChunk(qt, rpad, ktiles, n, dh, s, rpad, cmax, vecs, pf);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t key = c0 + t;
      vrows[t] = kv.v_block(key / pt, j) + (key % pt) * dh;
    }
    SoftmaxChunk(s, rpad, n, vecs, cmax, mx, sum, corr);
    ValueChunk(s, rpad, vrows, n, dh, corr, c0 == k0, ot, rpad, vecs, pf);
  }
}

}  // namespace

void SharedPrefixAttentionAvx512(ThreadPool& pool, const SharedPrefixAttentionArgs& a,
                                 Workspace& ws) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const PagedKv& kv = a.kv;
  const int64_t dh = kv.head_dim;
  const int32_t kvh = kv.num_kv_heads, group = a.heads / kvh;
  const int64_t keys = a.key_end - a.key_begin;

  // Tasks: kv head × row block × key split, as in the BLAS path.
  const int64_t head_rows = a.rows * group;
  const int64_t row_blocks = (head_rows + kMaxRowBlock - 1) / kMaxRowBlock;
  const int64_t block_rows = (head_rows + row_blocks - 1) / row_blocks;
  const int64_t units = kvh * row_blocks;
  const int64_t wanted = kTasksPerThread * int64_t{pool.size()};
  const int64_t splits =
      std::clamp<int64_t>((wanted + units - 1) / units, 1,
                          std::clamp<int64_t>(keys / kMinSplitKeys, 1, kMaxSplits));
  const int64_t tasks = units * splits;
  // Split s covers keys [split_begin(s), split_begin(s + 1)); every split has ≥ kMinSplitKeys / 2
  // keys, and boundaries fall on multiples of 16 keys from key_begin, so that with
  // page-aligned prefixes (the engine's case) no 8-key tile straddles a page.
  auto split_begin = [&](int64_t sp) {
    if (sp >= splits) return a.key_end;
    const int64_t off = keys * sp / splits;
    return a.key_begin + (splits > 1 ? off / 16 * 16 : off);
  };

  const Layout l{dh, (block_rows + kLanes - 1) / kLanes * kLanes,
                 (block_rows + kLanes - 1) / kLanes};
  const int64_t per_task = dh * l.rpad + 2 * l.rpad;  // Oᵀ, running max, running sum
  float* results = ws.Floats(tasks * per_task);
  const int64_t per_slot = dh * l.rpad + kChunkKeys * l.rpad + 2 * l.rpad + kChunkKeys * dh;
  const int64_t slots = std::min<int64_t>(tasks, pool.size());
  float* scratch = ws.Floats(slots * per_slot);
  // Query row of head row r of kv head j: query head (j·group + r % group) of sequence r / group.
  const float** qrows = ws.Array<const float*>(slots * block_rows);

  // Normalises one unit (kv head × row block) once all its key splits are done: merges the
  // splits of each row by their running max and sum, and transposes Oᵀ back into the output
  // rows, 16 rows (one vector of each Oᵀ row) at a time.
  auto normalise = [&](int64_t unit) {
    const int32_t j = static_cast<int32_t>(unit / row_blocks);
    const int64_t r0 = (unit % row_blocks) * block_rows;
    const int64_t nr = std::min(block_rows, head_rows - r0);
    const float* base = results + unit * splits * per_task;
    float weight[kMaxSplits][kLanes];
    float block[kLanes];
    for (int64_t b0 = 0; b0 < nr; b0 += kLanes) {
      const int64_t nb = std::min<int64_t>(kLanes, nr - b0);
      // Lanes past the block's rows (padding) weigh nothing; they are computed and not stored.
      for (int64_t sp = 0; sp < splits; ++sp) std::fill(weight[sp], weight[sp] + kLanes, 0.0f);
      for (int64_t r = 0; r < nb; ++r) {
        float max_all = kNegInf;
        for (int64_t sp = 0; sp < splits; ++sp) {
          max_all = std::max(max_all, base[sp * per_task + dh * l.rpad + b0 + r]);
        }
        float total = 0.0f;
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* part = base + sp * per_task + dh * l.rpad;
          weight[sp][r] = std::exp(part[b0 + r] - max_all);
          total += part[l.rpad + b0 + r] * weight[sp][r];
        }
        for (int64_t sp = 0; sp < splits; ++sp) weight[sp][r] /= total;
        const int64_t row = r0 + b0 + r;
        a.lse[(row / group) * a.ld_lse + int64_t{j} * group + row % group] =
            max_all + std::log(total);
      }
      for (int64_t d = 0; d < dh; ++d) {
        std::fill(block, block + kLanes, 0.0f);
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* __restrict src = base + sp * per_task + d * l.rpad + b0;
          for (int r = 0; r < kLanes; ++r) block[r] += weight[sp][r] * src[r];
        }
        for (int64_t r = 0; r < nb; ++r) {
          const int64_t row = r0 + b0 + r;
          a.out[(row / group) * a.ld_out + (int64_t{j} * group + row % group) * dh + d] = block[r];
        }
      }
    }
  };

  // The last split of a unit to finish normalises it, so that the op is one pass over the pool
  // (a second pass would cost another wake-up and wait, which on loaded cores can take longer
  // than the normalisation).
  auto* finished = ws.Array<std::atomic<int64_t>>(units);
  for (int64_t u = 0; u < units; ++u) new (&finished[u]) std::atomic<int64_t>(0);
  pool.ForEach(tasks, [&](int64_t slot, int64_t task) {
    const int64_t split = task % splits, unit = task / splits;
    const int32_t j = static_cast<int32_t>(unit / row_blocks);
    const int64_t r0 = (unit % row_blocks) * block_rows;
    const int64_t nr = std::min(block_rows, head_rows - r0);
    const float** rows = qrows + slot * block_rows;
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t row = r0 + r;
      rows[r] = a.q + (row / group) * a.ld_q + (int64_t{j} * group + row % group) * dh;
    }
    float* ot = results + task * per_task;
    float* mx = ot + dh * l.rpad;
    RunTask(a, l, j, rows, nr, split_begin(split), split_begin(split + 1),
            scratch + slot * per_slot, ot, mx, mx + l.rpad);
    // acq_rel: the last one sees every other split's results.
    if (finished[unit].fetch_add(1, std::memory_order_acq_rel) == splits - 1) normalise(unit);
  });
}

}  // namespace tandem::kernels

#endif  // TANDEM_GEMM_X86
