#include "kernels/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/decode_batch.h"
#include "kernels/moe_routing.h"
#include "kernels/scalar_math.h"

namespace tandem::kernels {
namespace {

double Dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Writes the snapshots whose position equals `done` (tokens processed so far) from `state`.
void EmitSnapshots(std::span<const StateSnapshot> snaps, size_t* next, int64_t done,
                   const float* state, int64_t state_floats) {
  while (*next < snaps.size() && snaps[*next].after_tokens == done) {
    std::memcpy(snaps[*next].dst, state, state_floats * sizeof(float));
    ++*next;
  }
}

}  // namespace


void ReferenceOps::Linear(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                          const float* bias, float* y, int64_t ld_y) {
  const int64_t k = w.cols;
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t j = 0; j < w.rows; ++j) {
    DequantizeRows(w, j, j + 1, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double s = Dot(x + i * ld_x, row.data(), k);
      if (bias != nullptr) s += bias[j];
      y[i * ld_y + j] = static_cast<float>(s);
    }
  }
}

void ReferenceOps::GatherRows(const WeightMatrix& table, std::span<const int32_t> ids, float* out,
                              int64_t ld_out) {
  for (size_t i = 0; i < ids.size(); ++i) {
    DequantizeRows(table, ids[i], ids[i] + 1, out + static_cast<int64_t>(i) * ld_out);
  }
}

void ReferenceOps::CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                            float* dst, int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * ld_dst + c] = src[r * ld_src + c];
  }
}

void ReferenceOps::AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                           float* dst, int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * ld_dst + c] += src[r * ld_src + c];
  }
}

void ReferenceOps::ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) x[r * ld_x + c] *= factor;
  }
}

void ReferenceOps::DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols,
                              float divisor) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) x[r * ld_x + c] /= divisor;
  }
}

void ReferenceOps::RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim,
                           const float* weight, float eps, float* out, int64_t ld_out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld_x;
    const double mean = Dot(xr, xr, dim) / static_cast<double>(dim);
    const float inv = static_cast<float>(1.0 / std::sqrt(mean + eps));
    for (int64_t c = 0; c < dim; ++c) out[r * ld_out + c] = weight[c] * (xr[c] * inv);
  }
}

void ReferenceOps::GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z,
                                int64_t rows, int64_t dim, int32_t groups, const float* weight,
                                float eps, float* out, int64_t ld_out) {
  const int64_t gsize = dim / groups;
  std::vector<float> v(dim);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < dim; ++c) v[c] = y[r * ld_y + c] * Silu(z[r * ld_z + c]);
    for (int32_t g = 0; g < groups; ++g) {
      const float* vg = v.data() + g * gsize;
      const double mean = Dot(vg, vg, gsize) / static_cast<double>(gsize);
      const float inv = static_cast<float>(1.0 / std::sqrt(mean + eps));
      for (int64_t c = g * gsize; c < (g + 1) * gsize; ++c) {
        out[r * ld_out + c] = weight[c] * (v[c] * inv);
      }
    }
  }
}

void ReferenceOps::Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
                        int64_t start_pos, float theta) {
  const int32_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      float* v = x + t * ld_x + int64_t{h} * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        float c, s;
        RopeCosSin(start_pos + t, RopeInvFreq(theta, i, head_dim), &c, &s);
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;         // x·cos + (−x[half:])·sin
        v[i + half] = b * c + a * s;  // x·cos + x[:half]·sin
      }
    }
  }
}

void ReferenceOps::Activate(Activation act, float* x, int64_t ld_x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) x[r * ld_x + c] = kernels::Activate(act, x[r * ld_x + c]);
  }
}

void ReferenceOps::GatedActivation(Activation act, const float* gate, int64_t ld_gate,
                                   const float* up, int64_t ld_up, int64_t rows, int64_t cols,
                                   float* out, int64_t ld_out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[r * ld_out + c] = kernels::Activate(act, gate[r * ld_gate + c]) * up[r * ld_up + c];
    }
  }
}

void ReferenceOps::GatedMlp(Activation act, const float* x, int64_t ld_x, int64_t rows,
                            const WeightMatrix& gate_up, const WeightMatrix& down, float* out,
                            int64_t ld_out, Workspace& ws) {
  const int64_t intermediate = down.cols;
  float* gu = ws.Floats(rows * 2 * intermediate);
  float* h = ws.Floats(rows * intermediate);
  Linear(x, ld_x, rows, gate_up, nullptr, gu, 2 * intermediate);
  GatedActivation(act, gu, 2 * intermediate, gu + intermediate, 2 * intermediate, rows,
                  intermediate, h, intermediate);
  Linear(h, intermediate, rows, down, nullptr, out, ld_out);
}

void ReferenceOps::Moe(const MoeArgs& a, Workspace& ws) {
  const int64_t H = a.hidden, I = a.intermediate;
  const int64_t up_rows = a.gated ? 2 * I : I;
  std::vector<float> logits(a.num_experts);
  std::vector<int32_t> experts(a.top_k);
  std::vector<float> weights(a.top_k);
  std::vector<float> gu(up_rows), h(I), y(H);
  for (int64_t t = 0; t < a.tokens; ++t) {
    const float* xt = a.x + t * a.ld_x;
    Linear(a.router_input() + t * a.ld_router_input(), a.router.cols, 1, a.router, nullptr,
           logits.data(), a.num_experts);
    RouteToken(logits.data(), a.num_experts, a.top_k, a.routing, experts.data(), weights.data());
    std::vector<double> acc(H, 0.0);
    for (int32_t j = 0; j < a.top_k; ++j) {
      const int32_t e = experts[j];
      Linear(xt, H, 1, a.gate_up[e], nullptr, gu.data(), up_rows);
      if (a.gated) {
        GatedActivation(a.act, gu.data(), 2 * I, gu.data() + I, 2 * I, 1, I, h.data(), I);
      } else {
        Activate(a.act, gu.data(), I, 1, I);
        std::copy(gu.begin(), gu.end(), h.begin());
      }
      Linear(h.data(), I, 1, a.down[e], nullptr, y.data(), H);
      for (int64_t c = 0; c < H; ++c) acc[c] += static_cast<double>(weights[j]) * y[c];
    }
    for (int64_t c = 0; c < H; ++c) a.out[t * a.ld_out + c] = static_cast<float>(acc[c]);
  }
}

void ReferenceOps::CausalConv1d(const CausalConvArgs& a) {
  if (a.sequences.count > 0) {
    ForEachVarlenPart(
        a, [&](const CausalConvArgs& run) { CausalConv1dStep(run); },
        [&](const CausalConvArgs& one) { CausalConv1d(one); });
    return;
  }
  const int64_t C = a.channels, K = a.kernel, T = a.tokens;
  // Window over [state ‖ u]: row r < K-1 is state row r, row K-1+t is token t.
  std::vector<float> win((K - 1 + T) * C);
  if (K > 1) std::memcpy(win.data(), a.state, (K - 1) * C * sizeof(float));
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(win.data() + (K - 1 + t) * C, a.u + t * a.ld_u, C * sizeof(float));
  }
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      double s = a.bias != nullptr ? a.bias[c] : 0.0;
      for (int64_t k = 0; k < K; ++k)
        s += static_cast<double>(a.weight[c * K + k]) * win[(t + k) * C + c];
      const float o = static_cast<float>(s);
      a.out[t * a.ld_out + c] = a.silu ? Silu(o) : o;
    }
  }
  // The state after s tokens is window rows [s, s+K-1).
  if (K == 1) return;  // no state
  for (const StateSnapshot& snap : a.snapshots) {
    std::memcpy(snap.dst, win.data() + snap.after_tokens * C, (K - 1) * C * sizeof(float));
  }
  std::memcpy(a.state, win.data() + T * C, (K - 1) * C * sizeof(float));
}

void ReferenceOps::CausalConv1dStep(const CausalConvArgs& a) {
  if (a.state_table == nullptr) return CausalConv1d(a);
  for (int64_t r = 0; r < a.tokens; ++r) CausalConv1d(DecodeRow(a, r));
}

void ReferenceOps::SelectiveScan(const SelectiveScanArgs& a) {
  if (a.sequences.count > 0) {
    ForEachVarlenPart(
        a, [&](const SelectiveScanArgs& run) { SelectiveStateUpdate(run); },
        [&](const SelectiveScanArgs& one) { SelectiveScan(one); });
    return;
  }
  const int64_t D = a.inner, N = a.state_size;
  size_t next = 0;
  EmitSnapshots(a.snapshots, &next, 0, a.state, D * N);
  for (int64_t t = 0; t < a.tokens; ++t) {
    const float* bt = a.b + t * a.ld_b;
    const float* ct = a.c + t * a.ld_c;
    for (int64_t d = 0; d < D; ++d) {
      const float u = a.u[t * a.ld_u + d];
      const float dt = Softplus(a.delta[t * a.ld_delta + d] + a.delta_bias[d]);
      float* h = a.state + d * N;
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        h[n] = std::exp(dt * a.a[d * N + n]) * h[n] + dt * bt[n] * u;
        acc += static_cast<double>(h[n]) * ct[n];
      }
      float y = static_cast<float>(acc + static_cast<double>(a.d[d]) * u);
      if (a.z != nullptr) y *= Silu(a.z[t * a.ld_z + d]);
      a.y[t * a.ld_y + d] = y;
    }
    EmitSnapshots(a.snapshots, &next, t + 1, a.state, D * N);
  }
}

void ReferenceOps::SelectiveStateUpdate(const SelectiveScanArgs& a) {
  if (a.state_table == nullptr) return SelectiveScan(a);
  for (int64_t r = 0; r < a.tokens; ++r) SelectiveScan(DecodeRow(a, r));
}

void ReferenceOps::SsdScan(const SsdScanArgs& a, Workspace& ws) {
  if (a.sequences.count > 0) {
    ForEachVarlenPart(
        a, [&](const SsdScanArgs& run) { SsdStateUpdate(run); },
        [&](const SsdScanArgs& one) { SsdScan(one, ws); });
    return;
  }
  const int64_t H = a.heads, P = a.head_dim, N = a.state_size;
  const int64_t heads_per_group = H / a.groups;
  size_t next = 0;
  EmitSnapshots(a.snapshots, &next, 0, a.state, H * P * N);
  for (int64_t t = 0; t < a.tokens; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / heads_per_group;
      const float* bt = a.b + t * a.ld_b + g * N;
      const float* ct = a.c + t * a.ld_c + g * N;
      const float dt = SsdDt(a.dt[t * a.ld_dt + h], a.dt_bias[h], a.dt_min, a.dt_max);
      const float decay = std::exp(dt * a.a[h]);
      for (int64_t p = 0; p < P; ++p) {
        const float x = a.x[t * a.ld_x + h * P + p];
        float* s = a.state + (h * P + p) * N;
        double acc = 0.0;
        for (int64_t n = 0; n < N; ++n) {
          s[n] = decay * s[n] + dt * x * bt[n];
          acc += static_cast<double>(s[n]) * ct[n];
        }
        a.y[t * a.ld_y + h * P + p] = static_cast<float>(acc + static_cast<double>(a.d[h]) * x);
      }
    }
    EmitSnapshots(a.snapshots, &next, t + 1, a.state, H * P * N);
  }
}

void ReferenceOps::SsdStateUpdate(const SsdScanArgs& a) {
  Workspace unused(64);
  if (a.state_table == nullptr) return SsdScan(a, unused);
  for (int64_t r = 0; r < a.tokens; ++r) SsdScan(DecodeRow(a, r), unused);
}

void ReferenceOps::WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v,
                           int64_t tokens, int64_t start_pos, const PagedKv& kv) {
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t pos = start_pos + t;
    const int64_t page = pos / kv.page_tokens, slot = pos % kv.page_tokens;
    for (int32_t h = 0; h < kv.num_kv_heads; ++h) {
      std::memcpy(kv.k_block(page, h) + slot * kv.head_dim, k + t * ld_k + h * kv.head_dim,
                  kv.head_dim * sizeof(float));
      std::memcpy(kv.v_block(page, h) + slot * kv.head_dim, v + t * ld_v + h * kv.head_dim,
                  kv.head_dim * sizeof(float));
    }
  }
}

void ReferenceOps::Attention(const AttentionArgs& a, Workspace& ws) {
  if (a.page_tables != nullptr) {
    for (int64_t r = 0; r < a.tokens; ++r) Attention(DecodeRow(a, r), ws);
    return;
  }
  const PagedKv& kv = a.kv;
  const int64_t dh = kv.head_dim;
  const int32_t group = a.heads / kv.num_kv_heads;
  std::vector<double> scores, acc(dh);
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t qpos = a.start_pos + t;
    scores.assign(qpos + 1, 0.0);
    for (int32_t h = 0; h < a.heads; ++h) {
      const int32_t kvh = h / group;
      const float* q = a.q + t * a.ld_q + h * dh;
      double max_s = -std::numeric_limits<double>::infinity();
      for (int64_t p = 0; p <= qpos; ++p) {
        const float* key = kv.k_block(p / kv.page_tokens, kvh) + (p % kv.page_tokens) * dh;
        scores[p] = Dot(q, key, dh) * a.scale;
        max_s = std::max(max_s, scores[p]);
      }
      double sum = 0.0;
      for (int64_t p = 0; p <= qpos; ++p) {
        scores[p] = std::exp(scores[p] - max_s);
        sum += scores[p];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t p = 0; p <= qpos; ++p) {
        const float* val = kv.v_block(p / kv.page_tokens, kvh) + (p % kv.page_tokens) * dh;
        for (int64_t i = 0; i < dh; ++i) acc[i] += scores[p] * val[i];
      }
      for (int64_t i = 0; i < dh; ++i)
        a.out[t * a.ld_out + h * dh + i] = static_cast<float>(acc[i] / sum);
    }
  }
}

}  // namespace tandem::kernels
