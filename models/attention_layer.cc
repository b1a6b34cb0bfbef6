#include "models/attention_layer.h"

#include "models/status_macros.h"

namespace tandem::models {

absl::StatusOr<AttentionLayer> AttentionLayer::Load(WeightStore& w, const std::string& p,
                                                    const AttentionDims& dims, int32_t hidden) {
  AttentionLayer layer;
  layer.dims_ = dims;
  layer.hidden_ = hidden;
  const int64_t q = int64_t{dims.heads} * dims.head_dim,
                kv = int64_t{dims.kv_heads} * dims.head_dim;
  TANDEM_ASSIGN_OR_RETURN(
      layer.qkv_,
      w.Stack({{p + "q_proj.weight", q}, {p + "k_proj.weight", kv}, {p + "v_proj.weight", kv}},
              dims.input_width));
  TANDEM_ASSIGN_OR_RETURN(layer.o_, w.Get(p + "o_proj.weight", {hidden, q}));
  return layer;
}

void AttentionLayer::Forward(const ForwardContext& ctx, const float* x, const QkvAdapter* adapter,
                             int32_t attention_index, float* out) const {
  kernels::Ops& ops = ctx.ops;
  const int64_t rows = ctx.rows, in = dims_.input_width;
  const int64_t q_width = int64_t{dims_.heads} * dims_.head_dim;
  const int64_t kv_width = int64_t{dims_.kv_heads} * dims_.head_dim;
  const int64_t width = q_width + 2 * kv_width;

  float* qkv = ctx.ws.Floats(rows * width);
  ops.Linear(x, in, rows, in, qkv_, nullptr, width, qkv, width);
  if (adapter != nullptr) {
    const int64_t r = adapter->rank;
    float* t = ctx.ws.Floats(rows * 3 * r);
    ops.Linear(x, in, rows, in, adapter->down, nullptr, 3 * r, t, 3 * r);
    const int64_t offsets[3] = {0, q_width, q_width + kv_width};
    const int64_t widths[3] = {q_width, kv_width, kv_width};
    float* delta = ctx.ws.Floats(rows * q_width);
    for (int j = 0; j < 3; ++j) {
      ops.Linear(t + j * r, 3 * r, rows, r, adapter->up[j], nullptr, widths[j], delta, widths[j]);
      for (int64_t row = 0; row < rows; ++row) {
        float* dst = qkv + row * width + offsets[j];
        const float* src = delta + row * widths[j];
        for (int64_t c = 0; c < widths[j]; ++c) dst[c] += src[c];
      }
    }
  }

  float* attn = ctx.ws.Floats(rows * q_width);
  for (const Segment& seg : ctx.segments) {
    float* q = qkv + seg.row * width;
    float* k = q + q_width;
    float* v = k + kv_width;
    if (dims_.rope) {
      ops.Rope(q, width, seg.tokens, dims_.heads, dims_.head_dim, seg.start_pos, dims_.rope_theta);
      ops.Rope(k, width, seg.tokens, dims_.kv_heads, dims_.head_dim, seg.start_pos,
               dims_.rope_theta);
    }
    const kernels::PagedKv kv = ctx.layout.KvView(attention_index, seg.state->kv_pages.data());
    ops.WriteKv(k, width, v, width, seg.tokens, seg.start_pos, kv);

    kernels::AttentionArgs args;
    args.tokens = seg.tokens;
    args.start_pos = seg.start_pos;
    args.heads = dims_.heads;
    args.q = q;
    args.ld_q = width;
    args.kv = kv;
    args.scale = dims_.scale;
    args.out = attn + seg.row * q_width;
    args.ld_out = q_width;
    ops.Attention(args, ctx.ws);
  }
  ops.Linear(attn, q_width, rows, q_width, o_, nullptr, hidden_, out, hidden_);
}

}  // namespace tandem::models
