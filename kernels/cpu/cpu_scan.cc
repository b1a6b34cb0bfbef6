// CpuOps: the recurrent ops — causal conv1d, Mamba-1 selective scan, Mamba-2 chunked SSD scan.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/decode_batch.h"
#include "kernels/scalar_math.h"

namespace tandem::kernels {
namespace {

// Channels per task for the per-channel recurrences: enough to amortise a task, small enough to
// keep the block's state in L1.
constexpr int64_t kChannelBlock = 64;

// Conv work (tokens × kernel × channels) below which one thread does a whole call: a decode
// step's conv is a few thousand multiply-adds, cheaper than waking the pool.
constexpr int64_t kSerialConvMacs = 32 * 1024;

// ---- Causal depthwise conv1d ----------------------------------------------------------------

// Channels [c0, c1) of a causal conv call: every channel's arithmetic is its own, so any split
// of the channels gives the same bits.
void ConvChannels(const CausalConvArgs& a, int64_t c0, int64_t c1) {
  const int64_t C = a.channels, K = a.kernel, T = a.tokens, S = K - 1;
  // Row r of the virtual window [state ‖ u] (r < K-1: state row, else token r-(K-1)).
  auto row = [&](int64_t r) { return r < S ? a.state + r * C : a.u + (r - S) * a.ld_u; };
  constexpr int64_t kMaxK = 8;
  // Snapshots and outputs read the incoming state, so it is overwritten last.
  for (const StateSnapshot& snap : a.snapshots) {
    for (int64_t r = 0; r < S; ++r) {
      std::memcpy(snap.dst + r * C + c0, row(snap.after_tokens + r) + c0,
                  (c1 - c0) * sizeof(float));
    }
  }
  // Weights transposed to [K, block] so the channel loop is contiguous (vectorises).
  float wt[kMaxK * kChannelBlock];
  for (int64_t cb = c0; cb < c1; cb += kChannelBlock) {
    const int64_t ce = std::min(c1, cb + kChannelBlock), w = ce - cb;
    if (K > kMaxK) {
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = cb; c < ce; ++c) {
          float s = a.bias != nullptr ? a.bias[c] : 0.0f;
          for (int64_t k = 0; k < K; ++k) s += a.weight[c * K + k] * row(t + k)[c];
          a.out[t * a.ld_out + c] = a.silu ? Silu(s) : s;
        }
      }
      continue;
    }
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t c = 0; c < w; ++c) wt[k * kChannelBlock + c] = a.weight[(cb + c) * K + k];
    }
    for (int64_t t = 0; t < T; ++t) {
      float* __restrict o = a.out + t * a.ld_out + cb;
      if (a.bias != nullptr) {
        std::memcpy(o, a.bias + cb, w * sizeof(float));
      } else {
        std::fill(o, o + w, 0.0f);
      }
      for (int64_t k = 0; k < K; ++k) {
        const float* __restrict in = row(t + k) + cb;
        const float* __restrict wk = wt + k * kChannelBlock;
#pragma omp simd
        for (int64_t c = 0; c < w; ++c) o[c] += wk[c] * in[c];
      }
      if (a.silu) {
#pragma omp simd
        for (int64_t c = 0; c < w; ++c) o[c] = FastSilu(o[c]);
      }
    }
  }
  // New state = window rows [T, T+K-1). Rows still inside the old state shift down, which
  // is safe in increasing order because the source row index is ≥ the destination's.
  for (int64_t r = 0; r < S; ++r) {
    const float* src = row(T + r);
    if (src != a.state + r * C) {
      std::memmove(a.state + r * C + c0, src + c0, (c1 - c0) * sizeof(float));
    }
  }
}

// Calls fn(r, lo, hi) for the parts of the flat item range [i0, i1) that fall in each decode
// row r, an item being one of `per_row` pieces of a row's work: a batched step splits its
// sequences × pieces over the pool in one call.
template <typename F>
void ForRowPieces(int64_t i0, int64_t i1, int64_t per_row, F&& fn) {
  for (int64_t i = i0; i < i1;) {
    const int64_t r = i / per_row, end = std::min(i1, (r + 1) * per_row);
    fn(r, i - r * per_row, end - r * per_row);
    i = end;
  }
}

}  // namespace

void CpuOps::CausalConv1d(const CausalConvArgs& a) {
  if (a.sequences.count > 0) {
    ForEachVarlenPart(
        a, [&](const CausalConvArgs& run) { CausalConv1dStep(run); },
        [&](const CausalConvArgs& one) { CausalConv1d(one); });
    return;
  }
  // Whole channel blocks per task.
  const int64_t grain = std::max<int64_t>(1, kSerialConvMacs / std::max<int64_t>(
                                                 1, a.tokens * a.kernel * kChannelBlock)) *
                        kChannelBlock;
  pool_.ParallelFor(a.channels, grain,
                    [&](int64_t c0, int64_t c1) { ConvChannels(a, c0, c1); });
}

// The decode step is the scan over one token: the same arithmetic, so that a token's output and
// the state it leaves are bit-identical whether it came through a prefill or a decode step (a
// cache hit resumes by prefill what a cold run decoded). The separate per-channel loop this
// replaced rounded differently; its speed advantage on one token was within noise.
void CpuOps::CausalConv1dStep(const CausalConvArgs& a) {
  if (a.state_table == nullptr) return CausalConv1d(a);
  const int64_t C = a.channels;
  const int64_t grain = std::max<int64_t>(1, kSerialConvMacs / std::max<int64_t>(1, a.kernel));
  pool_.ParallelFor(a.tokens * C, grain, [&](int64_t i0, int64_t i1) {
    ForRowPieces(i0, i1, C, [&](int64_t r, int64_t c0, int64_t c1) {
      ConvChannels(DecodeRow(a, r), c0, c1);
    });
  });
}

// ---- Mamba-1 selective scan -----------------------------------------------------------------

// A block of channels is transposed to state-major ([N, block]) in per-slot scratch, so that
// every inner loop runs across channels: vertical SIMD, no horizontal reductions (N is often
// only 16, too short to vectorise over).
namespace {

constexpr int64_t kScanWidth = kChannelBlock;

// Floats of scratch one block of SelectiveScanBlock needs.
int64_t ScanBlockScratch(int64_t state_size) { return (2 * state_size + 4) * kScanWidth; }

// Channel block `blk` (channels [blk·kScanWidth, …)) of a selective scan, in `scratch`.
void SelectiveScanBlock(const SelectiveScanArgs& a, int64_t blk, float* scratch) {
  const int64_t D = a.inner, N = a.state_size, T = a.tokens;
  constexpr int64_t kWidth = kScanWidth;
  const int64_t d0 = blk * kWidth, w = std::min(kWidth, D - d0);
  float* __restrict ht = scratch;                       // [N, kWidth]
  float* __restrict at = ht + N * kWidth;               // [N, kWidth]
  float* __restrict dtv = at + N * kWidth;
  float* __restrict dtu = dtv + kWidth;
  float* __restrict acc = dtu + kWidth;
  for (int64_t i = 0; i < w; ++i) {
    for (int64_t n = 0; n < N; ++n) {
      ht[n * kWidth + i] = a.state[(d0 + i) * N + n];
      at[n * kWidth + i] = a.a[(d0 + i) * N + n];
    }
  }
  auto store = [&](float* dst) {  // block back to [channel, N] layout
    for (int64_t i = 0; i < w; ++i) {
      for (int64_t n = 0; n < N; ++n) dst[(d0 + i) * N + n] = ht[n * kWidth + i];
    }
  };
  size_t next = 0;
  auto emit = [&](int64_t done) {
    while (next < a.snapshots.size() && a.snapshots[next].after_tokens == done) {
      store(a.snapshots[next++].dst);
    }
  };
  emit(0);
  for (int64_t t = 0; t < T; ++t) {
    const float* __restrict bt = a.b + t * a.ld_b;
    const float* __restrict ct = a.c + t * a.ld_c;
    const float* __restrict ut = a.u + t * a.ld_u + d0;
    const float* __restrict delta = a.delta + t * a.ld_delta + d0;
    const float* __restrict dbias = a.delta_bias + d0;
    const float* __restrict dskip = a.d + d0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) {
      const float dt = FastSoftplus(delta[i] + dbias[i]);
      dtv[i] = dt;
      dtu[i] = dt * ut[i];
      acc[i] = dskip[i] * ut[i];
    }
    for (int64_t n = 0; n < N; ++n) {
      const float bn = bt[n], cn = ct[n];
      float* __restrict hn = ht + n * kWidth;
      const float* __restrict an = at + n * kWidth;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) {
        const float h = FastExp(dtv[i] * an[i]) * hn[i] + dtu[i] * bn;
        hn[i] = h;
        acc[i] += h * cn;
      }
    }
    float* __restrict yt = a.y + t * a.ld_y + d0;
    if (a.z != nullptr) {
      const float* __restrict zt = a.z + t * a.ld_z + d0;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) yt[i] = acc[i] * FastSilu(zt[i]);
    } else {
      for (int64_t i = 0; i < w; ++i) yt[i] = acc[i];
    }
    emit(t + 1);
  }
  store(a.state);
}

}  // namespace

void CpuOps::SelectiveScan(const SelectiveScanArgs& a) {
  if (a.sequences.count > 0) {
    ForEachVarlenPart(
        a, [&](const SelectiveScanArgs& run) { SelectiveStateUpdate(run); },
        [&](const SelectiveScanArgs& one) { SelectiveScan(one); });
    return;
  }
  const int64_t blocks = (a.inner + kScanWidth - 1) / kScanWidth;
  float* scratch = SlotScratch(ScanBlockScratch(a.state_size));
  const int64_t slot_floats = slot_scratch_floats_;
  pool_.ForEach(blocks, [&](int64_t slot, int64_t blk) {
    SelectiveScanBlock(a, blk, scratch + slot * slot_floats);
  });
}

// A decode batch: every (sequence, channel block) pair is one item of the pool.
void CpuOps::SelectiveStateUpdate(const SelectiveScanArgs& a) {
  if (a.state_table == nullptr) return SelectiveScan(a);
  const int64_t blocks = (a.inner + kScanWidth - 1) / kScanWidth;
  float* scratch = SlotScratch(ScanBlockScratch(a.state_size));
  const int64_t slot_floats = slot_scratch_floats_;
  pool_.ForEach(a.tokens * blocks, [&](int64_t slot, int64_t item) {
    SelectiveScanBlock(DecodeRow(a, item / blocks), item % blocks, scratch + slot * slot_floats);
  });
}

// ---- Mamba-2 SSD ----------------------------------------------------------------------------
//
// Tokens are cut into chunks of Q = min(chunk_size, ssd_max_chunk_). Per head, with a_t = dt_t·A
// (log-decay), cum_i = Σ_{τ≤i} a_τ inside the chunk and x̃_j = dt_j·x_j:
//   Y[i]  = Σ_{j≤i} (C_i·B_j)·exp(cum_i − cum_j)·x̃_j      intra-chunk: (CBᵀ ∘ decay mask) · x̃
//         + exp(cum_i)·(C_i · S_prev)                       inter-chunk, from the passed state
//         + D·x_i
//   S_new = exp(cum_{L-1})·S_prev + Σ_j exp(cum_{L-1} − cum_j)·x̃_j ⊗ B_j     state passing
// Chunks run in order. Per chunk, phase 1 computes CBᵀ once per group (shared by the group's
// heads), phase 2 runs the heads in parallel; the four products per head are single-threaded
// sgemm calls. (Recomputing CBᵀ per head to save the two barriers per chunk measured 30% slower
// per thread at N = 128, Q = 32.) The state buffer holds S at chunk boundaries; a snapshot strictly
// inside a chunk rolls the chunk's starting state forward with the recurrent step.

namespace {

// One recurrent step for one head: s[P,N] ← decay·s + dt·x ⊗ b.
inline void SsdStep(float* __restrict s, int64_t P, int64_t N, float decay, float dt,
                    const float* __restrict x, const float* __restrict b) {
  for (int64_t p = 0; p < P; ++p) {
    const float dx = dt * x[p];
    float* __restrict sp = s + p * N;
#pragma omp simd
    for (int64_t n = 0; n < N; ++n) sp[n] = decay * sp[n] + dx * b[n];
  }
}

// One token of the SSD recurrence for one head: S ← decay·S + dt·x ⊗ b, then y = S·c + d·x.
// Out of line on purpose: the decode step and the batch-invariant scan both call this one
// function, so a token is the same instruction sequence on either path (an inlined copy could be
// vectorised or contracted differently in each caller and round differently).
__attribute__((noinline)) void SsdRecurrentToken(float* __restrict s, int64_t P, int64_t N,
                                                 float decay, float dt, const float* __restrict x,
                                                 const float* __restrict b,
                                                 const float* __restrict c, float d,
                                                 float* __restrict y) {
  for (int64_t p = 0; p < P; ++p) {
    const float dx = dt * x[p];
    float* __restrict sp = s + p * N;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t n = 0; n < N; ++n) {
      const float v = decay * sp[n] + dx * b[n];
      sp[n] = v;
      dot += v * c[n];
    }
    y[p] = dot + d * x[p];
  }
}

struct SsdSlot {
  float* dt;   // [Q]
  float* cum;  // [Q]
  float* xt;   // [Q, P]  x̃, later rescaled for the state update
  float* m;    // [Q, Q]  masked, decayed CBᵀ
  float* cs;   // [Q, P]  C·S_prevᵀ
};

// Row blocks of CBᵀ per task in phase 1.
constexpr int64_t kCbRows = 32;

}  // namespace

void CpuOps::SsdScan(const SsdScanArgs& a, Workspace& ws) {
  if (a.sequences.count > 0) {
    ForEachVarlenPart(
        a, [&](const SsdScanArgs& run) { SsdStateUpdate(run); },
        [&](const SsdScanArgs& one) { SsdScan(one, ws); });
    return;
  }
  if (batch_invariant_) {
    SsdScanRecurrent(a);
    return;
  }
  const int64_t T = a.tokens, H = a.heads, P = a.head_dim, N = a.state_size, G = a.groups;
  const int64_t chunk = std::min<int64_t>(a.chunk_size, std::max<int32_t>(1, ssd_max_chunk_));
  const int64_t Q = std::max<int64_t>(1, std::min<int64_t>(chunk, T));
  const int64_t heads_per_group = H / G;
  const int64_t slots = std::min<int64_t>(H, pool_.size());
  float* cb = ws.Floats(G * Q * Q);  // CBᵀ of the current chunk, per group
  SsdSlot* slot_mem = ws.Array<SsdSlot>(slots);
  for (int64_t s = 0; s < slots; ++s) {
    slot_mem[s] = {ws.Floats(Q), ws.Floats(Q), ws.Floats(Q * P), ws.Floats(Q * Q),
                   ws.Floats(Q * P)};
  }
  for (const StateSnapshot& snap : a.snapshots) {
    if (snap.after_tokens == 0) std::memcpy(snap.dst, a.state, H * P * N * sizeof(float));
  }
  for (int64_t t0 = 0; t0 < T; t0 += Q) {
    const int64_t L = std::min(Q, T - t0);
    const int64_t row_blocks = (L + kCbRows - 1) / kCbRows;
    // Phase 1: CBᵀ, lower triangle by row blocks (rows [i0, i1) need columns [0, i1)).
    pool_.Run(G * row_blocks, [&](int64_t task) {
      const int64_t g = task / row_blocks, i0 = (task % row_blocks) * kCbRows;
      const int64_t i1 = std::min(L, i0 + kCbRows);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, i1 - i0, i1, N, 1.0f,
                  a.c + (t0 + i0) * a.ld_c + g * N, a.ld_c, a.b + t0 * a.ld_b + g * N, a.ld_b, 0.0f,
                  cb + g * Q * Q + i0 * Q, Q);
    });
    // Phase 2: the heads.
    pool_.ForEach(H, [&](int64_t slot, int64_t h) {
      SsdSlot& sc = slot_mem[slot];
      const int64_t g = h / heads_per_group;
      const float A = a.a[h], Dh = a.d[h];
      float* __restrict S = a.state + h * P * N;
      const float* bptr = a.b + t0 * a.ld_b + g * N;
      const float* cptr = a.c + t0 * a.ld_c + g * N;
      const float* xptr = a.x + t0 * a.ld_x + h * P;
      float* yptr = a.y + t0 * a.ld_y + h * P;
      float run = 0.0f;
      for (int64_t i = 0; i < L; ++i) {
        const float dt = SsdDt(a.dt[(t0 + i) * a.ld_dt + h], a.dt_bias[h], a.dt_min, a.dt_max);
        sc.dt[i] = dt;
        run += dt * A;
        sc.cum[i] = run;
        const float* __restrict xi = xptr + i * a.ld_x;
        float* __restrict xti = sc.xt + i * P;
#pragma omp simd
        for (int64_t p = 0; p < P; ++p) xti[p] = dt * xi[p];
      }
      for (const StateSnapshot& snap : a.snapshots) {
        if (snap.after_tokens <= t0 || snap.after_tokens >= t0 + L) continue;
        float* dst = snap.dst + h * P * N;
        std::memcpy(dst, S, P * N * sizeof(float));
        for (int64_t i = 0; i < snap.after_tokens - t0; ++i) {
          SsdStep(dst, P, N, std::exp(sc.dt[i] * A), sc.dt[i], xptr + i * a.ld_x,
                  bptr + i * a.ld_b);
        }
      }
      // M = CBᵀ ∘ exp(cum_i − cum_j), zero above the diagonal.
      const float* cbg = cb + g * Q * Q;
      for (int64_t i = 0; i < L; ++i) {
        const float* __restrict gi = cbg + i * Q;
        float* __restrict mi = sc.m + i * Q;
        const float ci = sc.cum[i];
        const float* __restrict cum = sc.cum;
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) mi[j] = gi[j] * FastExp(ci - cum[j]);
        for (int64_t j = i + 1; j < L; ++j) mi[j] = 0.0f;
      }
      // Y = M·x̃ ; CS = C·S_prevᵀ ; Y += exp(cum_i)·CS + D·x.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, P, L, 1.0f, sc.m, Q, sc.xt, P, 0.0f,
                  yptr, a.ld_y);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, P, N, 1.0f, cptr, a.ld_c, S, N, 0.0f,
                  sc.cs, P);
      for (int64_t i = 0; i < L; ++i) {
        const float decay_in = FastExp(sc.cum[i]);
        const float* __restrict csi = sc.cs + i * P;
        const float* __restrict xi = xptr + i * a.ld_x;
        float* __restrict yi = yptr + i * a.ld_y;
#pragma omp simd
        for (int64_t p = 0; p < P; ++p) yi[p] += decay_in * csi[p] + Dh * xi[p];
      }
      // S ← exp(cum_last)·S + (exp(cum_last − cum_j)·x̃_j)ᵀ · B.
      const float cum_last = sc.cum[L - 1];
      for (int64_t j = 0; j < L; ++j) {
        const float w = FastExp(cum_last - sc.cum[j]);
        float* __restrict xtj = sc.xt + j * P;
#pragma omp simd
        for (int64_t p = 0; p < P; ++p) xtj[p] *= w;
      }
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, P, N, L, 1.0f, sc.xt, P, bptr, a.ld_b,
                  FastExp(cum_last), S, N);
      for (const StateSnapshot& snap : a.snapshots) {
        if (snap.after_tokens == t0 + L)
          std::memcpy(snap.dst + h * P * N, S, P * N * sizeof(float));
      }
    });
  }
}

// The batch-invariant scan: per head, the decode step's recurrence token by token. The head's
// state (P·N floats, 32 KiB at 64 × 128) stays in L1 across the tokens, so this is compute-bound
// at about 2·P·N multiply-adds per token and head — a few percent of a layer's GEMM work.
void CpuOps::SsdScanRecurrent(const SsdScanArgs& a) {
  const int64_t T = a.tokens, H = a.heads, P = a.head_dim, N = a.state_size;
  const int64_t heads_per_group = H / a.groups;
  pool_.ParallelFor(H, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / heads_per_group;
      float* S = a.state + h * P * N;
      size_t next = 0;
      auto emit = [&](int64_t done) {
        for (; next < a.snapshots.size() && a.snapshots[next].after_tokens == done; ++next) {
          std::memcpy(a.snapshots[next].dst + h * P * N, S, P * N * sizeof(float));
        }
      };
      emit(0);
      for (int64_t t = 0; t < T; ++t) {
        const float dt = SsdDt(a.dt[t * a.ld_dt + h], a.dt_bias[h], a.dt_min, a.dt_max);
        SsdRecurrentToken(S, P, N, std::exp(dt * a.a[h]), dt, a.x + t * a.ld_x + h * P,
                          a.b + t * a.ld_b + g * N, a.c + t * a.ld_c + g * N, a.d[h],
                          a.y + t * a.ld_y + h * P);
        emit(t + 1);
      }
    }
  });
}

namespace {

// Heads [h0, h1) of one token's step: the recurrent scan's arithmetic (SsdRecurrentToken).
void SsdStepHeads(const SsdScanArgs& a, int64_t h0, int64_t h1) {
  const int64_t P = a.head_dim, N = a.state_size;
  const int64_t heads_per_group = a.heads / a.groups;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t g = h / heads_per_group;
    float* S = a.state + h * P * N;
    for (const StateSnapshot& snap : a.snapshots) {
      if (snap.after_tokens == 0) std::memcpy(snap.dst + h * P * N, S, P * N * sizeof(float));
    }
    const float dt = SsdDt(a.dt[h], a.dt_bias[h], a.dt_min, a.dt_max);
    SsdRecurrentToken(S, P, N, std::exp(dt * a.a[h]), dt, a.x + h * P, a.b + g * N,
                      a.c + g * N, a.d[h], a.y + h * P);
    for (const StateSnapshot& snap : a.snapshots) {
      if (snap.after_tokens == 1) std::memcpy(snap.dst + h * P * N, S, P * N * sizeof(float));
    }
  }
}

}  // namespace

// One token for every head (of every sequence, for a decode batch), grouped a few heads per
// task because one head's step is too little work to wake a thread for.
void CpuOps::SsdStateUpdate(const SsdScanArgs& a) {
  const int64_t H = a.heads;
  const int64_t grain =
      std::max<int64_t>(1, 32768 / std::max<int64_t>(1, int64_t{a.head_dim} * a.state_size));
  if (a.state_table == nullptr) {
    pool_.ParallelFor(H, grain, [&](int64_t h0, int64_t h1) { SsdStepHeads(a, h0, h1); });
    return;
  }
  pool_.ParallelFor(a.tokens * H, grain, [&](int64_t i0, int64_t i1) {
    ForRowPieces(i0, i1, H, [&](int64_t r, int64_t h0, int64_t h1) {
      SsdStepHeads(DecodeRow(a, r), h0, h1);
    });
  });
}

}  // namespace tandem::kernels
