// CpuOps: dense ops (Linear, norms, RoPE, activations, MLP, MoE, KV writes). The scans are in
// cpu_scan.cc and attention in cpu_attention.cc.
#include "kernels/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/moe_routing.h"
#include "kernels/scalar_math.h"

namespace tandem::kernels {
namespace {

// Elementwise loops get a thread only for this many floats of work or more.
constexpr int64_t kElementGrain = 16 * 1024;

int64_t RowGrain(int64_t cols) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(cols, 1));
}

// Linear problems below this many multiply-adds run on the calling thread only.
constexpr int64_t kSerialMacs = 64 * 1024;

// Rows of x for which our own kernel beats OpenBLAS: batched decode (2 … 40 rows). It reads the
// weights in place, where sgemm packs them on every call (an extra pass over memory that small M
// cannot amortise): 1.6-2.8× faster at 2-32 rows with the weights coming from memory. From ~48
// rows sgemm's packed kernel computes faster than the extra pass costs. For one row (GEMV) ours
// and sgemv trade wins by shape. Measured by bench/kernels/gemm_bench.cc (docs/BENCHMARKS.md).
constexpr int64_t kOwnMinRows = 2;
constexpr int64_t kOwnMaxRows = 40;

}  // namespace

CpuOps::CpuOps(int threads) : pool_(threads) { SetBlasThreads(1); }

std::string CpuOps::ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                                    std::span<const SamplingRow> rules,
                                    std::span<const PenaltyToken> seen, SampledToken* out) {
  samplers_.resize(static_cast<size_t>(pool_.size()));  // each grows to the vocabulary once
  pool_.ForEach(static_cast<int64_t>(rules.size()), [&](int slot, int64_t r) {
    out[r] = SampleReadBackRow(samplers_[slot], src, ld_src, cols, rules, seen,
                               static_cast<size_t>(r));
  });
  return "";
}

float* CpuOps::SlotScratch(int64_t floats_per_slot) {
  // Rounded to whole cache lines so that slots never share one.
  slot_scratch_floats_ = (floats_per_slot + 15) / 16 * 16;
  slot_scratch_.Reset();
  return slot_scratch_.Floats(slot_scratch_floats_ * pool_.size());
}

void CpuOps::Linear(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                    const float* bias, float* y, int64_t ld_y) {
  const int64_t k = w.cols, n = w.rows;
  if (m <= 0 || n <= 0) return;
  // One row of narrow weights goes to our kernel too: sgemv would need them widened first, an
  // extra pass over memory where the kernel is bound by it.
  const bool own_rows = (m >= kOwnMinRows || w.format != WeightFormat::kF32) && m <= kOwnMaxRows;
  const bool own = batch_invariant_ || gemm_impl_ == GemmImpl::kOwn ||
                   (gemm_impl_ == GemmImpl::kAuto && own_rows);
  auto slice = [&](int64_t n0, int64_t n1) {
    if (own) {
      OwnGemmNT(x, ld_x, m, w, bias, n0, n1, y, ld_y);
    } else {
      BlasGemmNT(x, ld_x, m, w, bias, n0, n1, y, ld_y);
    }
  };
  if (m * n * k <= kSerialMacs || pool_.size() == 1) {
    slice(0, n);
    return;
  }
  // Column slices in multiples of 24 (the kernels' tile widths divide it), a few per thread so a
  // thread slowed by a neighbour on a shared core does not hold the others up.
  const int64_t units = (n + 23) / 24;
  const int64_t tasks = std::min<int64_t>(units, int64_t{pool_.size()} * (m == 1 ? 2 : 4));
  const int64_t per = (units + tasks - 1) / tasks * 24;
  pool_.Run(tasks, [&](int64_t t) {
    const int64_t n0 = t * per, n1 = std::min(n, n0 + per);
    if (n0 < n1) slice(n0, n1);
  });
}

void CpuOps::GatherRows(const WeightMatrix& table, std::span<const int32_t> ids, float* out,
                        int64_t ld_out) {
  const int64_t count = static_cast<int64_t>(ids.size());
  pool_.ParallelFor(count, RowGrain(table.cols), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) DequantizeRows(table, ids[i], ids[i] + 1, out + i * ld_out);
  });
}

void CpuOps::CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                      int64_t ld_dst) {
  pool_.ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      std::memcpy(dst + r * ld_dst, src + r * ld_src, static_cast<size_t>(cols) * sizeof(float));
    }
  });
}

void CpuOps::AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                     int64_t ld_dst) {
  pool_.ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict s = src + r * ld_src;
      float* __restrict d = dst + r * ld_dst;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) d[c] += s[c];
    }
  });
}

void CpuOps::ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) {
  pool_.ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* __restrict row = x + r * ld_x;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] *= factor;
    }
  });
}

void CpuOps::DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float divisor) {
  pool_.ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* __restrict row = x + r * ld_x;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] /= divisor;
    }
  });
}

void CpuOps::RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
                     float eps, float* out, int64_t ld_out) {
  pool_.ParallelFor(rows, RowGrain(dim), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict xr = x + r * ld_x;
      float* __restrict o = out + r * ld_out;
      // The sum of squares in double: as cheap here (the row is read once anyway) and it keeps
      // the norm's rounding out of the error budget of long, deep models.
      double ss = 0.0;
#pragma omp simd reduction(+ : ss)
      for (int64_t c = 0; c < dim; ++c) ss += static_cast<double>(xr[c]) * xr[c];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
      for (int64_t c = 0; c < dim; ++c) o[c] = weight[c] * (xr[c] * inv);
    }
  });
}

void CpuOps::GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z, int64_t rows,
                          int64_t dim, int32_t groups, const float* weight, float eps, float* out,
                          int64_t ld_out) {
  const int64_t gsize = dim / groups;
  pool_.ParallelFor(rows, RowGrain(dim), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict yr = y + r * ld_y;
      const float* __restrict zr = z + r * ld_z;
      float* __restrict o = out + r * ld_out;
      // The gated values go to `out` first, then are normalised in place.
#pragma omp simd
      for (int64_t c = 0; c < dim; ++c) o[c] = yr[c] * FastSilu(zr[c]);
      for (int32_t g = 0; g < groups; ++g) {
        float* __restrict v = o + g * gsize;
        const float* __restrict wg = weight + g * gsize;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < gsize; ++c) ss += static_cast<double>(v[c]) * v[c];
        const float inv =
            static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(gsize) + eps));
        for (int64_t c = 0; c < gsize; ++c) v[c] = wg[c] * (v[c] * inv);
      }
    }
  });
}

void CpuOps::Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
                  int64_t start_pos, float theta) {
  const int32_t half = head_dim / 2;
  constexpr int32_t kMaxHalf = 512;
  pool_.ParallelFor(tokens, RowGrain(int64_t{heads} * head_dim), [&](int64_t t0, int64_t t1) {
    float cs[kMaxHalf], sn[kMaxHalf];
    for (int64_t t = t0; t < t1; ++t) {
      for (int32_t i0 = 0; i0 < half; i0 += kMaxHalf) {
        const int32_t i1 = std::min(half, i0 + kMaxHalf);
        for (int32_t i = i0; i < i1; ++i) {
          RopeCosSin(start_pos + t, RopeInvFreq(theta, i, head_dim), &cs[i - i0], &sn[i - i0]);
        }
        for (int32_t h = 0; h < heads; ++h) {
          float* __restrict lo = x + t * ld_x + int64_t{h} * head_dim;
          float* __restrict hi = lo + half;
          for (int32_t i = i0; i < i1; ++i) {
            const float a = lo[i], b = hi[i], c = cs[i - i0], s = sn[i - i0];
            lo[i] = a * c - b * s;
            hi[i] = b * c + a * s;
          }
        }
      }
    }
  });
}

void CpuOps::GatedActivation(Activation act, const float* gate, int64_t ld_gate, const float* up,
                             int64_t ld_up, int64_t rows, int64_t cols, float* out,
                             int64_t ld_out) {
  pool_.ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = gate + r * ld_gate;
      const float* u = up + r * ld_up;
      float* o = out + r * ld_out;
      if (act == Activation::kSilu) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) o[c] = FastSilu(g[c]) * u[c];
      } else {
        for (int64_t c = 0; c < cols; ++c) o[c] = kernels::Activate(act, g[c]) * u[c];
      }
    }
  });
}

void CpuOps::Activate(Activation act, float* x, int64_t ld_x, int64_t rows, int64_t cols) {
  pool_.ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* __restrict row = x + r * ld_x;
      if (act == Activation::kSilu) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) row[c] = FastSilu(row[c]);
      } else if (act == Activation::kReluSquared) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) row[c] = ReluSquared(row[c]);
      } else {
        for (int64_t c = 0; c < cols; ++c) row[c] = kernels::Activate(act, row[c]);
      }
    }
  });
}

void CpuOps::Moe(const MoeArgs& a, Workspace& ws) {
  const int64_t T = a.tokens, H = a.hidden, I = a.intermediate;
  const int32_t E = a.num_experts, K = a.top_k;
  const int64_t up_rows = a.gated ? 2 * I : I;
  float* logits = ws.Floats(T * E);
  Linear(a.router_input(), a.ld_router_input(), T, a.router, nullptr, logits, E);
  int32_t* experts = ws.Array<int32_t>(T * K);
  float* weights = ws.Floats(T * K);
  pool_.ParallelFor(T, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      RouteToken(logits + t * E, E, K, a.routing, experts + t * K, weights + t * K);
    }
  });
  // Bucket the (token, weight) pairs by expert, tokens in increasing order within a bucket.
  int64_t* offset = ws.Array<int64_t>(E + 1);
  std::fill(offset, offset + E + 1, 0);
  for (int64_t i = 0; i < T * K; ++i) ++offset[experts[i] + 1];
  for (int32_t e = 0; e < E; ++e) offset[e + 1] += offset[e];
  int64_t* fill = ws.Array<int64_t>(E);
  std::copy(offset, offset + E, fill);
  int64_t* rows = ws.Array<int64_t>(T * K);
  float* row_weight = ws.Floats(T * K);
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t j = 0; j < K; ++j) {
      const int64_t pos = fill[experts[t * K + j]]++;
      rows[pos] = t;
      row_weight[pos] = weights[t * K + j];
    }
  }
  int64_t max_rows = 0;
  for (int32_t e = 0; e < E; ++e) max_rows = std::max(max_rows, offset[e + 1] - offset[e]);
  float* xin = ws.Floats(max_rows * H);
  float* gu = ws.Floats(max_rows * up_rows);
  float* yout = ws.Floats(max_rows * H);
  for (int64_t t = 0; t < T; ++t) std::fill(a.out + t * a.ld_out, a.out + t * a.ld_out + H, 0.0f);
  for (int32_t e = 0; e < E; ++e) {
    const int64_t r0 = offset[e], cnt = offset[e + 1] - r0;
    if (cnt == 0) continue;
    const float* src = a.x + rows[r0] * a.ld_x;
    int64_t ld_src = a.ld_x;
    if (cnt > 1) {  // a single token is used in place
      for (int64_t r = 0; r < cnt; ++r) {
        std::memcpy(xin + r * H, a.x + rows[r0 + r] * a.ld_x, H * sizeof(float));
      }
      src = xin;
      ld_src = H;
    }
    Linear(src, ld_src, cnt, a.gate_up[e], nullptr, gu, up_rows);
    if (a.gated) {
      GatedActivation(a.act, gu, 2 * I, gu + I, 2 * I, cnt, I, gu, 2 * I);
    } else {
      Activate(a.act, gu, I, cnt, I);
    }
    Linear(gu, up_rows, cnt, a.down[e], nullptr, yout, H);
    // Rows within an expert belong to distinct tokens, so the scatter parallelises safely.
    pool_.ParallelFor(cnt, RowGrain(H), [&](int64_t q0, int64_t q1) {
      for (int64_t r = q0; r < q1; ++r) {
        float* o = a.out + rows[r0 + r] * a.ld_out;
        const float wr = row_weight[r0 + r];
        const float* yr = yout + r * H;
        for (int64_t c = 0; c < H; ++c) o[c] += wr * yr[c];
      }
    });
  }
}

void CpuOps::WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
                     int64_t start_pos, const PagedKv& kv) {
  const int64_t dh = kv.head_dim;
  pool_.ParallelFor(tokens, RowGrain(2 * kv.num_kv_heads * dh), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pos = start_pos + t;
      const int64_t page = pos / kv.page_tokens, slot = pos % kv.page_tokens;
      for (int32_t h = 0; h < kv.num_kv_heads; ++h) {
        std::memcpy(kv.k_block(page, h) + slot * dh, k + t * ld_k + h * dh, dh * sizeof(float));
        std::memcpy(kv.v_block(page, h) + slot * dh, v + t * ld_v + h * dh, dh * sizeof(float));
      }
    }
  });
}

}  // namespace tandem::kernels
