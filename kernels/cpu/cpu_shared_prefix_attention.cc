// CpuOps: Hydragen's prefix attention. All sequences that share the prefix pages attend to them
// together: for each kv head, the queries of every sequence × every query head of the GQA group
// form one row block Q, and a chunk of C keys costs two GEMMs, S = Q·Kᵀ and O += softmax(S)·V,
// with an online softmax across chunks. Each K/V chunk is read once per row block instead of once
// per sequence, and the GEMMs run at the machine's matrix-multiply speed instead of the
// dot-product speed of per-sequence decode attention.
//
// This file holds the portable implementation (gathered K/V chunks, OpenBLAS products) and the
// dispatch; where the CPU has AVX-512, the fused kernel of hydragen_avx512.cc runs instead.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/hydragen_attention.h"

// The softmax loops between the GEMMs are a fifth of the op's time at 256-bit vectors; where the
// CPU has 512-bit ones, using them there is worth it (GCC prefers 256 by default on x86-64-v4).
#pragma GCC target("prefer-vector-width=512")

namespace tandem::kernels {
namespace {

// Keys per chunk: large enough that the GEMMs are efficient, small enough that a chunk's S and
// K/V copies stay in L2 next to the row block's Q and accumulator.
constexpr int64_t kChunkKeys = 256;
// Rows (sequences × group heads) per task. Larger blocks read K/V fewer times; 256 rows of a
// 128-wide head keep Q, the accumulator and S near 400 KiB.
constexpr int64_t kMaxRowBlock = 256;
constexpr int64_t kTasksPerThread = 8;
// A key split shorter than this costs more in its merge than it gains in parallelism.
constexpr int64_t kMinSplitKeys = 512;

// Copies keys [begin, begin + n) of kv head j (K or V) into a contiguous [n, dh] block, or
// returns the page's own block when the range lies within one page.
const float* GatherKeys(const PagedKv& kv, bool values, int32_t j, int64_t begin, int64_t n,
                        float* dst) {
  const int64_t pt = kv.page_tokens, dh = kv.head_dim;
  auto block = [&](int64_t page) { return values ? kv.v_block(page, j) : kv.k_block(page, j); };
  if (begin / pt == (begin + n - 1) / pt) return block(begin / pt) + (begin % pt) * dh;
  for (int64_t p = begin; p < begin + n;) {
    const int64_t page = p / pt, lo = p % pt, cnt = std::min(pt - lo, begin + n - p);
    std::memcpy(dst + (p - begin) * dh, block(page) + lo * dh, cnt * dh * sizeof(float));
    p += cnt;
  }
  return dst;
}

// exp(x) for x ≤ 0 — a score minus its row's running maximum — equal to FastExp there: the same
// reduction and polynomial, without FastExp's overflow handling, which such arguments never
// need (2^n for n ∈ [−126, 0] is one normal float). The softmax pass between the two GEMMs is
// the op's largest cost after the GEMMs themselves.
inline float ExpNonPositive(float x) {
  const float xc = x < -87.3f ? -87.3f : x;
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693145751953125f;
  r = r - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < -87.3f ? 0.0f : p * scale;
}

// max(x[0 … n)), in independent lanes so that it vectorises (a running max does not: each step
// waits for the previous one).
inline float RowMax(const float* __restrict x, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = lanes[l] > x[c + l] ? lanes[l] : x[c + l];
  }
  for (; c < n; ++c) lanes[0] = lanes[0] > x[c] ? lanes[0] : x[c];
  float m = lanes[0];
  for (int l = 1; l < kLanes; ++l) m = m > lanes[l] ? m : lanes[l];
  return m;
}

}  // namespace

bool SharedPrefixImplSupported(SharedPrefixImpl impl) {
  switch (impl) {
    case SharedPrefixImpl::kAuto:
    case SharedPrefixImpl::kBlas:
      return true;
    case SharedPrefixImpl::kAvx512:
      // The AVX-512 kernel is compiled in every x86-64 build; the CPU must also run it.
      return GemmIsaSupported(GemmIsa::kAvx512);
  }
  return false;
}

void SharedPrefixAttentionWith(SharedPrefixImpl impl, ThreadPool& pool,
                               const SharedPrefixAttentionArgs& args, Workspace& ws) {
  if (args.rows <= 0) return;
  if (args.key_end <= args.key_begin) {  // an empty range: out = 0, lse = −inf
    const int64_t width = int64_t{args.heads} * args.kv.head_dim;
    for (int64_t m = 0; m < args.rows; ++m) {
      std::fill(args.out + m * args.ld_out, args.out + m * args.ld_out + width, 0.0f);
      std::fill(args.lse + m * args.ld_lse, args.lse + m * args.ld_lse + args.heads,
                -std::numeric_limits<float>::infinity());
    }
    return;
  }
  if (impl == SharedPrefixImpl::kAuto) {
    static const SharedPrefixImpl best = SharedPrefixImplSupported(SharedPrefixImpl::kAvx512)
                                             ? SharedPrefixImpl::kAvx512
                                             : SharedPrefixImpl::kBlas;
    impl = best;
  }
#ifdef TANDEM_GEMM_X86
  if (impl == SharedPrefixImpl::kAvx512) {
    SharedPrefixAttentionAvx512(pool, args, ws);
    return;
  }
#endif
  SharedPrefixAttentionBlas(pool, args, ws);
}

void CpuOps::SharedPrefixAttention(const SharedPrefixAttentionArgs& a, Workspace& ws) {
  SharedPrefixAttentionWith(SharedPrefixImpl::kAuto, pool_, a, ws);
}

void SharedPrefixAttentionBlas(ThreadPool& pool, const SharedPrefixAttentionArgs& a,
                               Workspace& ws) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const PagedKv& kv = a.kv;
  const int64_t dh = kv.head_dim;
  const int32_t kvh = kv.num_kv_heads, group = a.heads / kvh;
  const int64_t keys = a.key_end - a.key_begin;

  // Tasks: kv head × row block × key split, about kTasksPerThread per thread: on cores shared
  // with other processes a thread that loses its core must not hold the others up. With 8 tasks
  // for 2 threads (one per kv head at 32/8 heads) the op ran at ~60 GFLOP/s, with 16 at ~90
  // (hydragen_bench BM_SharedPrefixAttention, batch 64, 4K keys).
  const int64_t head_rows = a.rows * group;
  const int64_t row_blocks = (head_rows + kMaxRowBlock - 1) / kMaxRowBlock;
  const int64_t block_rows = (head_rows + row_blocks - 1) / row_blocks;
  const int64_t units = kvh * row_blocks;
  const int64_t wanted = kTasksPerThread * int64_t{pool.size()};
  const int64_t splits = std::clamp<int64_t>((wanted + units - 1) / units, 1,
                                             std::max<int64_t>(1, keys / kMinSplitKeys));
  const int64_t split_keys = (keys + splits - 1) / splits;
  const int64_t tasks = units * splits;

  // Per task: unnormalised accumulator [block_rows, dh], running max and sum per row.
  const int64_t per_task = block_rows * (dh + 2);
  float* results = ws.Floats(tasks * per_task);
  // Per slot: Q block (pre-scaled), scores, and K/V chunk copies.
  const int64_t per_slot = block_rows * dh + block_rows * kChunkKeys + 2 * kChunkKeys * dh;
  const int64_t slots = std::min<int64_t>(tasks, pool.size());
  float* scratch = ws.Floats(slots * per_slot);

  // Row r of a head's rows is query head (j·group + r % group) of sequence r / group.
  auto q_row = [&](int32_t j, int64_t r) {
    return a.q + (r / group) * a.ld_q + (int64_t{j} * group + r % group) * dh;
  };

  pool.ForEach(tasks, [&](int64_t slot, int64_t task) {
    const int64_t split = task % splits, unit = task / splits;
    const int32_t j = static_cast<int32_t>(unit / row_blocks);
    const int64_t r0 = (unit % row_blocks) * block_rows;
    const int64_t nr = std::min(block_rows, head_rows - r0);
    const int64_t k0 = a.key_begin + split * split_keys;
    const int64_t k1 = std::min(a.key_end, k0 + split_keys);
    float* acc = results + task * per_task;
    float* mx = acc + block_rows * dh;
    float* sum = mx + block_rows;
    float* qb = scratch + slot * per_slot;
    float* s = qb + block_rows * dh;
    float* kc = s + block_rows * kChunkKeys;
    float* vc = kc + kChunkKeys * dh;
    for (int64_t r = 0; r < nr; ++r) {
      const float* __restrict src = q_row(j, r0 + r);
      float* __restrict dst = qb + r * dh;
#pragma omp simd
      for (int64_t i = 0; i < dh; ++i) dst[i] = src[i] * a.scale;
    }
    std::fill(mx, mx + nr, kNegInf);
    std::fill(sum, sum + nr, 0.0f);
    for (int64_t c0 = k0; c0 < k1; c0 += kChunkKeys) {
      const int64_t n = std::min(kChunkKeys, k1 - c0);
      const float* kb = GatherKeys(kv, false, j, c0, n, kc);
      const float* vb = GatherKeys(kv, true, j, c0, n, vc);
      BlasSgemmNT(nr, n, dh, qb, dh, kb, dh, 0.0f, s, kChunkKeys);
      const bool first = c0 == k0;
      for (int64_t r = 0; r < nr; ++r) {
        float* __restrict sr = s + r * kChunkKeys;
        const float block_max = RowMax(sr, n);
        const float new_max = std::max(mx[r], block_max);
        const float correction = FastExp(mx[r] - new_max);
        mx[r] = new_max;
        float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
        for (int64_t c = 0; c < n; ++c) {
          sr[c] = ExpNonPositive(sr[c] - new_max);
          block_sum += sr[c];
        }
        sum[r] = sum[r] * correction + block_sum;
        if (!first && correction != 1.0f) {
          float* __restrict ar = acc + r * dh;
#pragma omp simd
          for (int64_t i = 0; i < dh; ++i) ar[i] *= correction;
        }
      }
      BlasSgemmNN(nr, dh, n, s, kChunkKeys, vb, dh, first ? 0.0f : 1.0f, acc, dh);
    }
  });

  // Normalise, merging the key splits of each row by their running max and sum.
  pool.ParallelFor(units, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t unit = u0; unit < u1; ++unit) {
      const int32_t j = static_cast<int32_t>(unit / row_blocks);
      const int64_t r0 = (unit % row_blocks) * block_rows;
      const int64_t nr = std::min(block_rows, head_rows - r0);
      const float* base = results + unit * splits * per_task;
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t row = r0 + r;
        float max_all = kNegInf;
        for (int64_t sp = 0; sp < splits; ++sp) {
          max_all = std::max(max_all, base[sp * per_task + block_rows * dh + r]);
        }
        float total = 0.0f;
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* part = base + sp * per_task;
          total += part[block_rows * dh + block_rows + r] *
                   std::exp(part[block_rows * dh + r] - max_all);
        }
        const int64_t m = row / group, h = int64_t{j} * group + row % group;
        float* __restrict o = a.out + m * a.ld_out + h * dh;
        std::fill(o, o + dh, 0.0f);
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* part = base + sp * per_task;
          const float w = std::exp(part[block_rows * dh + r] - max_all) / total;
          if (w == 0.0f) continue;  // an empty split's accumulator was never written
          const float* __restrict ar = part + r * dh;
#pragma omp simd
          for (int64_t i = 0; i < dh; ++i) o[i] += w * ar[i];
        }
        a.lse[m * a.ld_lse + h] = max_all + std::log(total);
      }
    }
  });
}

}  // namespace tandem::kernels
