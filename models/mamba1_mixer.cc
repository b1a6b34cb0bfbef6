#include "models/mamba1_mixer.h"

#include <cmath>

#include "models/segment_runs.h"
#include "models/status_macros.h"

namespace tandem::models {

absl::StatusOr<Mamba1Mixer> Mamba1Mixer::Load(WeightStore& w, const std::string& p,
                                              const ModelConfig& config, int32_t ssm_index,
                                              const TensorShard& shard) {
  Mamba1Mixer m;
  m.dims_ = ShardMamba1(config.mamba1, shard);
  m.hidden_ = config.hidden_size;
  m.eps_ = config.rms_norm_eps;
  m.ssm_index_ = ssm_index;
  const int64_t h = config.hidden_size, din = config.mamba1.inner, n = m.dims_.state_size,
                k = m.dims_.conv_kernel, r = m.dims_.dt_rank;
  // Every tensor indexed by the inner channels keeps this worker's share of them.
  const TensorSlice channels = ShardSegments(shard, {din});
  const TensorSlice x_and_z = ShardSegments(shard, {din, din});
  TANDEM_ASSIGN_OR_RETURN(m.in_proj_, w.Matrix(p + "in_proj.weight", 2 * din, h, x_and_z));
  if (m.dims_.proj_bias) {
    TANDEM_ASSIGN_OR_RETURN(m.in_proj_bias_, w.Get(p + "in_proj.bias", {2 * din}, x_and_z));
    TANDEM_ASSIGN_OR_RETURN(m.out_proj_bias_, w.Get(p + "out_proj.bias", {h}));
  }
  TANDEM_ASSIGN_OR_RETURN(m.conv_weight_, w.Get(p + "conv1d.weight", {din, 1, k}, channels));
  if (m.dims_.conv_bias) {
    TANDEM_ASSIGN_OR_RETURN(m.conv_bias_, w.Get(p + "conv1d.bias", {din}, channels));
  }
  TANDEM_ASSIGN_OR_RETURN(m.x_proj_,
                          w.Matrix(p + "x_proj.weight", r + 2 * n, din, channels.Along(1)));
  TANDEM_ASSIGN_OR_RETURN(m.dt_norm_, w.Get(p + "dt_layernorm.weight", {r}));
  TANDEM_ASSIGN_OR_RETURN(m.b_norm_, w.Get(p + "b_layernorm.weight", {n}));
  TANDEM_ASSIGN_OR_RETURN(m.c_norm_, w.Get(p + "c_layernorm.weight", {n}));
  TANDEM_ASSIGN_OR_RETURN(m.dt_proj_, w.Matrix(p + "dt_proj.weight", din, r, channels));
  TANDEM_ASSIGN_OR_RETURN(m.dt_bias_, w.Get(p + "dt_proj.bias", {din}, channels));
  TANDEM_ASSIGN_OR_RETURN(
      m.a_, w.Map(
                p + "A_log", {din, n}, [](float v) { return -std::exp(v); }, channels));
  TANDEM_ASSIGN_OR_RETURN(m.d_, w.Get(p + "D", {din}, channels));
  TANDEM_ASSIGN_OR_RETURN(m.out_proj_, w.Matrix(p + "out_proj.weight", h, din, channels.Along(1)));
  return m;
}

void Mamba1Mixer::Forward(const ForwardContext& ctx, const float* x, float* out) const {
  kernels::Ops& ops = ctx.ops;
  const int64_t rows = ctx.rows, h = hidden_, din = dims_.inner, n = dims_.state_size,
                r = dims_.dt_rank;
  const int64_t p_width = r + 2 * n;

  float* xz = ctx.ws.Floats(rows * 2 * din);  // [rows, x ‖ z]
  ops.Linear(x, h, rows, in_proj_, in_proj_bias_, xz, 2 * din);

  // Causal conv over the x half, every sequence continuing from its own conv state.
  float* u = ctx.ws.Floats(rows * din);
  const SsmLayerState& layout = ctx.layout.ssm_layer(ssm_index_);
  // The whole pass in one call of each recurrent op: a decode batch, or one varlen call.
  const bool decode_batch = AllPlainDecode(ctx.segments);
  kernels::CausalConvArgs conv;
  conv.tokens = rows;
  conv.channels = static_cast<int32_t>(din);
  conv.kernel = dims_.conv_kernel;
  conv.u = xz;
  conv.ld_u = 2 * din;
  conv.weight = conv_weight_;
  conv.bias = conv_bias_;
  conv.silu = true;
  conv.out = u;
  conv.ld_out = din;
  conv.state_table = ctx.ssm_blocks;
  conv.state_offset = layout.conv_offset;
  if (decode_batch) {
    ops.CausalConv1dStep(conv);
  } else {
    conv.sequences = ctx.sequences;
    ops.CausalConv1d(conv);
  }

  // x_proj → dt ‖ B ‖ C, each RMS-normalised (Jamba's inner norms), then dt_proj without bias.
  float* p = ctx.ws.Floats(rows * p_width);
  ops.Linear(u, din, rows, x_proj_, nullptr, p, p_width);
  // dt, B and C read every inner channel: the workers' partial products are added up.
  ctx.AllReduce(p, rows * p_width);
  float* pn = ctx.ws.Floats(rows * p_width);
  ops.RmsNorm(p, p_width, rows, r, dt_norm_, eps_, pn, p_width);
  ops.RmsNorm(p + r, p_width, rows, n, b_norm_, eps_, pn + r, p_width);
  ops.RmsNorm(p + r + n, p_width, rows, n, c_norm_, eps_, pn + r + n, p_width);
  float* delta = ctx.ws.Floats(rows * din);
  ops.Linear(pn, p_width, rows, dt_proj_, nullptr, delta, din);

  float* y = ctx.ws.Floats(rows * din);
  kernels::SelectiveScanArgs scan;
  scan.tokens = rows;
  scan.inner = static_cast<int32_t>(din);
  scan.state_size = static_cast<int32_t>(n);
  scan.u = u;
  scan.ld_u = din;
  scan.delta = delta;
  scan.ld_delta = din;
  scan.delta_bias = dt_bias_;
  scan.a = a_;
  scan.b = pn + r;
  scan.ld_b = p_width;
  scan.c = pn + r + n;
  scan.ld_c = p_width;
  scan.d = d_;
  scan.z = xz + din;
  scan.ld_z = 2 * din;
  scan.y = y;
  scan.ld_y = din;
  scan.state_table = ctx.ssm_blocks;
  scan.state_offset = layout.ssm_offset;
  if (decode_batch) {
    ops.SelectiveStateUpdate(scan);
  } else {
    scan.sequences = ctx.sequences;
    ops.SelectiveScan(scan);
  }
  ops.Linear(y, din, rows, out_proj_, ctx.adds_output_bias() ? out_proj_bias_ : nullptr, out, h);
}

}  // namespace tandem::models
