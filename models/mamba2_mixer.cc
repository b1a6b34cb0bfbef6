#include "models/mamba2_mixer.h"

#include <cmath>

#include "models/segment_runs.h"
#include "models/status_macros.h"

namespace tandem::models {

absl::StatusOr<Mamba2Mixer> Mamba2Mixer::Load(WeightStore& w, const std::string& p,
                                              const ModelConfig& config, int32_t ssm_index,
                                              const TensorShard& shard) {
  Mamba2Mixer m;
  const Mamba2Dims& full = config.mamba2;
  const ShardedMamba2 sharded = ShardMamba2(full, shard);
  m.dims_ = sharded.dims;
  m.norm_spans_ranks_ = sharded.norm_spans_ranks;
  m.full_inner_ = sharded.full_inner;
  m.hidden_ = config.hidden_size;
  m.ssm_index_ = ssm_index;
  const int64_t h = config.hidden_size, din = full.inner, heads = full.heads, k = full.conv_kernel,
                conv = full.conv_channels(), width = full.in_proj_width();
  // This worker's share: its heads' channels of z and x, the B/C groups they read, their dt.
  const TensorSlice inner = ShardSegments(shard, {din});
  const TensorSlice head_values = ShardSegments(shard, {heads});
  TensorSlice xbc;      // within xBC (the conv's channels)
  TensorSlice in_rows;  // within in_proj's rows, z ‖ xBC ‖ dt
  if (shard.sharded()) {
    const int64_t gn = int64_t{full.groups} * full.state_size;
    const GroupShare groups = Mamba2Groups(full, shard);
    const int64_t b0 = din + int64_t{groups.first} * full.state_size,
                  bn = int64_t{groups.count} * full.state_size;
    xbc.ranges = {inner.ranges[0], {b0, b0 + bn}, {b0 + gn, b0 + gn + bn}};
    in_rows.ranges.push_back(inner.ranges[0]);
    for (const auto& [begin, end] : xbc.ranges) in_rows.ranges.emplace_back(din + begin, din + end);
    const auto& [h0, h1] = head_values.ranges[0];
    in_rows.ranges.emplace_back(din + conv + h0, din + conv + h1);
  }
  TANDEM_ASSIGN_OR_RETURN(m.in_proj_, w.Matrix(p + "in_proj.weight", width, h, in_rows));
  if (m.dims_.proj_bias) {
    TANDEM_ASSIGN_OR_RETURN(m.in_proj_bias_, w.Get(p + "in_proj.bias", {width}, in_rows));
    TANDEM_ASSIGN_OR_RETURN(m.out_proj_bias_, w.Get(p + "out_proj.bias", {h}));
  }
  TANDEM_ASSIGN_OR_RETURN(m.conv_weight_, w.Get(p + "conv1d.weight", {conv, 1, k}, xbc));
  if (m.dims_.conv_bias) {
    TANDEM_ASSIGN_OR_RETURN(m.conv_bias_, w.Get(p + "conv1d.bias", {conv}, xbc));
  }
  TANDEM_ASSIGN_OR_RETURN(m.dt_bias_, w.Get(p + "dt_bias", {heads}, head_values));
  TANDEM_ASSIGN_OR_RETURN(
      m.a_, w.Map(
                p + "A_log", {heads}, [](float v) { return -std::exp(v); }, head_values));
  TANDEM_ASSIGN_OR_RETURN(m.d_, w.Get(p + "D", {heads}, head_values));
  TANDEM_ASSIGN_OR_RETURN(m.norm_, w.Get(p + "norm.weight", {din}, inner));
  TANDEM_ASSIGN_OR_RETURN(m.out_proj_, w.Matrix(p + "out_proj.weight", h, din, inner.Along(1)));
  return m;
}

void Mamba2Mixer::Forward(const ForwardContext& ctx, const float* x, float* out) const {
  kernels::Ops& ops = ctx.ops;
  const int64_t rows = ctx.rows, h = hidden_, din = dims_.inner;
  const int64_t gn = int64_t{dims_.groups} * dims_.state_size;
  const int64_t conv_ch = dims_.conv_channels(), width = dims_.in_proj_width();

  float* zxbcdt = ctx.ws.Floats(rows * width);  // [rows, z ‖ xBC ‖ dt]
  ops.Linear(x, h, rows, in_proj_, in_proj_bias_, zxbcdt, width);

  float* xbc = ctx.ws.Floats(rows * conv_ch);  // conv output after SiLU: [rows, x ‖ B ‖ C]
  float* y = ctx.ws.Floats(rows * din);
  const SsmLayerState& layout = ctx.layout.ssm_layer(ssm_index_);
  kernels::CausalConvArgs conv;
  conv.tokens = rows;
  conv.channels = static_cast<int32_t>(conv_ch);
  conv.kernel = dims_.conv_kernel;
  conv.u = zxbcdt + din;
  conv.ld_u = width;
  conv.weight = conv_weight_;
  conv.bias = conv_bias_;
  conv.silu = true;
  conv.out = xbc;
  conv.ld_out = conv_ch;
  conv.state_table = ctx.ssm_blocks;
  conv.state_offset = layout.conv_offset;

  kernels::SsdScanArgs scan;
  scan.tokens = rows;
  scan.heads = dims_.heads;
  scan.head_dim = dims_.head_dim;
  scan.groups = dims_.groups;
  scan.state_size = dims_.state_size;
  scan.chunk_size = dims_.chunk_size;
  scan.x = xbc;
  scan.ld_x = conv_ch;
  scan.dt = zxbcdt + din + conv_ch;
  scan.ld_dt = width;
  scan.dt_bias = dt_bias_;
  scan.dt_min = dims_.dt_min;
  scan.dt_max = dims_.dt_max;
  scan.a = a_;
  scan.b = xbc + din;
  scan.ld_b = conv_ch;
  scan.c = xbc + din + gn;
  scan.ld_c = conv_ch;
  scan.d = d_;
  scan.y = y;
  scan.ld_y = din;
  scan.state_table = ctx.ssm_blocks;
  scan.state_offset = layout.ssm_offset;

  // The whole pass in one call of each op: a decode batch, or one varlen call.
  if (AllPlainDecode(ctx.segments)) {
    ops.CausalConv1dStep(conv);
    ops.SsdStateUpdate(scan);
  } else {
    conv.sequences = ctx.sequences;
    scan.sequences = ctx.sequences;
    ops.CausalConv1d(conv);
    ops.SsdScan(scan, ctx.ws);
  }

  float* normed = ctx.ws.Floats(rows * din);
  if (norm_spans_ranks_) {
    // y ⊙ silu(z), normalised by its squares summed over every worker's channels.
    ops.GatedActivation(kernels::Activation::kSilu, zxbcdt, width, y, din, rows, din, normed, din);
    float* sums = ctx.ws.Floats(rows);
    ops.RowSquareSums(normed, din, rows, din, sums);
    ctx.AllReduce(sums, rows);
    ops.RmsNormBySums(normed, din, rows, din, sums, full_inner_, norm_, dims_.norm_eps);
  } else {
    ops.GatedRmsNorm(y, din, zxbcdt, width, rows, din, dims_.norm_groups, norm_, dims_.norm_eps,
                     normed, din);
  }
  ops.Linear(normed, din, rows, out_proj_, ctx.adds_output_bias() ? out_proj_bias_ : nullptr, out,
             h);
}

}  // namespace tandem::models
