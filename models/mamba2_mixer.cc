#include "models/mamba2_mixer.h"

#include <cmath>

#include "models/segment_runs.h"
#include "models/status_macros.h"

namespace tandem::models {

absl::StatusOr<Mamba2Mixer> Mamba2Mixer::Load(WeightStore& w, const std::string& p,
                                              const ModelConfig& config, int32_t ssm_index) {
  Mamba2Mixer m;
  m.dims_ = config.mamba2;
  m.hidden_ = config.hidden_size;
  m.ssm_index_ = ssm_index;
  const int64_t h = config.hidden_size, din = m.dims_.inner, heads = m.dims_.heads,
                k = m.dims_.conv_kernel, conv = m.dims_.conv_channels(),
                width = m.dims_.in_proj_width();
  TANDEM_ASSIGN_OR_RETURN(m.in_proj_, w.Matrix(p + "in_proj.weight", width, h));
  if (m.dims_.proj_bias) {
    TANDEM_ASSIGN_OR_RETURN(m.in_proj_bias_, w.Get(p + "in_proj.bias", {width}));
    TANDEM_ASSIGN_OR_RETURN(m.out_proj_bias_, w.Get(p + "out_proj.bias", {h}));
  }
  TANDEM_ASSIGN_OR_RETURN(m.conv_weight_, w.Get(p + "conv1d.weight", {conv, 1, k}));
  if (m.dims_.conv_bias) {
    TANDEM_ASSIGN_OR_RETURN(m.conv_bias_, w.Get(p + "conv1d.bias", {conv}));
  }
  TANDEM_ASSIGN_OR_RETURN(m.dt_bias_, w.Get(p + "dt_bias", {heads}));
  TANDEM_ASSIGN_OR_RETURN(m.a_, w.Map(p + "A_log", {heads}, [](float v) { return -std::exp(v); }));
  TANDEM_ASSIGN_OR_RETURN(m.d_, w.Get(p + "D", {heads}));
  TANDEM_ASSIGN_OR_RETURN(m.norm_, w.Get(p + "norm.weight", {din}));
  TANDEM_ASSIGN_OR_RETURN(m.out_proj_, w.Matrix(p + "out_proj.weight", h, din));
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
  ops.GatedRmsNorm(y, din, zxbcdt, width, rows, din, dims_.norm_groups, norm_, dims_.norm_eps,
                   normed, din);
  ops.Linear(normed, din, rows, out_proj_, out_proj_bias_, out, h);
}

}  // namespace tandem::models
