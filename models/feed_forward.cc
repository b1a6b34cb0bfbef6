#include "models/feed_forward.h"

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::models {

absl::StatusOr<GatedMlp> GatedMlp::Load(WeightStore& w, const std::string& p, int32_t hidden,
                                        int32_t intermediate, kernels::Activation act,
                                        const TensorShard& shard) {
  GatedMlp mlp;
  mlp.hidden_ = hidden;
  mlp.intermediate_ = intermediate / shard.ranks;
  mlp.act_ = act;
  const TensorSlice channels = ShardSegments(shard, {intermediate});
  TANDEM_ASSIGN_OR_RETURN(mlp.gate_up_, w.Stack({{p + "gate_proj.weight", intermediate, channels},
                                                 {p + "up_proj.weight", intermediate, channels}},
                                                hidden));
  TANDEM_ASSIGN_OR_RETURN(
      mlp.down_, w.Matrix(p + "down_proj.weight", hidden, intermediate, channels.Along(1)));
  return mlp;
}

absl::StatusOr<GatedMlp> GatedMlp::LoadStacked(WeightStore& w, const std::string& p, int32_t hidden,
                                               int32_t intermediate, kernels::Activation act,
                                               const TensorShard& shard) {
  GatedMlp mlp;
  mlp.hidden_ = hidden;
  mlp.intermediate_ = intermediate / shard.ranks;
  mlp.act_ = act;
  TANDEM_ASSIGN_OR_RETURN(mlp.gate_up_,
                          w.Matrix(p + "input_linear.weight", int64_t{2} * intermediate, hidden,
                                   ShardSegments(shard, {intermediate, intermediate})));
  TANDEM_ASSIGN_OR_RETURN(mlp.down_, w.Matrix(p + "output_linear.weight", hidden, intermediate,
                                              ShardSegments(shard, {intermediate}, 1)));
  return mlp;
}

void GatedMlp::Forward(const ForwardContext& ctx, const float* x, float* out) const {
  ctx.ops.GatedMlp(act_, x, hidden_, ctx.rows, gate_up_, down_, out, hidden_, ctx.ws);
}

absl::StatusOr<PlainMlp> PlainMlp::Load(WeightStore& w, const std::string& p, int32_t hidden,
                                        int32_t intermediate, kernels::Activation act, bool bias,
                                        const TensorShard& shard) {
  PlainMlp mlp;
  mlp.hidden_ = hidden;
  mlp.intermediate_ = intermediate / shard.ranks;
  mlp.act_ = act;
  const TensorSlice channels = ShardSegments(shard, {intermediate});
  TANDEM_ASSIGN_OR_RETURN(mlp.up_, w.Matrix(p + "up_proj.weight", intermediate, hidden, channels));
  TANDEM_ASSIGN_OR_RETURN(
      mlp.down_, w.Matrix(p + "down_proj.weight", hidden, intermediate, channels.Along(1)));
  if (bias) {
    TANDEM_ASSIGN_OR_RETURN(mlp.up_bias_, w.Get(p + "up_proj.bias", {intermediate}, channels));
    TANDEM_ASSIGN_OR_RETURN(mlp.down_bias_, w.Get(p + "down_proj.bias", {hidden}));
  }
  return mlp;
}

void PlainMlp::Forward(const ForwardContext& ctx, const float* x, float* out) const {
  float* h = ctx.ws.Floats(ctx.rows * intermediate_);
  ctx.ops.Linear(x, hidden_, ctx.rows, up_, up_bias_, h, intermediate_);
  ctx.ops.Activate(act_, h, intermediate_, ctx.rows, intermediate_);
  ctx.ops.Linear(h, intermediate_, ctx.rows, down_, ctx.adds_output_bias() ? down_bias_ : nullptr,
                 out, hidden_);
}

MixtureOfExperts MixtureOfExperts::Shaped(const ModelConfig& config, const TensorShard& shard) {
  MixtureOfExperts moe;
  moe.hidden_ = config.hidden_size;
  moe.width_ = config.expert_latent_size > 0 ? config.expert_latent_size : config.hidden_size;
  moe.intermediate_ = config.expert_intermediate_size / shard.ranks;
  moe.top_k_ = config.experts_per_token;
  moe.routing_ = config.expert_routing;
  moe.gated_ = config.ffn_gated;
  moe.act_ = config.ffn_activation;
  return moe;
}

absl::StatusOr<MixtureOfExperts> MixtureOfExperts::Load(WeightStore& w, const std::string& p,
                                                        const ModelConfig& config,
                                                        const TensorShard& shard) {
  MixtureOfExperts moe = Shaped(config, shard);
  const int64_t h = config.hidden_size, i = config.expert_intermediate_size;
  const TensorSlice channels = ShardSegments(shard, {i});
  TANDEM_ASSIGN_OR_RETURN(moe.router_, w.Matrix(p + "router.weight", config.num_experts, h));
  for (int32_t e = 0; e < config.num_experts; ++e) {
    const std::string ep = absl::StrCat(p, "experts.", e, ".");
    kernels::WeightMatrix gate_up;
    kernels::WeightMatrix down;
    TANDEM_ASSIGN_OR_RETURN(
        gate_up,
        w.Stack({{ep + "gate_proj.weight", i, channels}, {ep + "up_proj.weight", i, channels}}, h));
    TANDEM_ASSIGN_OR_RETURN(down, w.Matrix(ep + "down_proj.weight", h, i, channels.Along(1)));
    moe.gate_up_.push_back(gate_up);
    moe.down_.push_back(down);
  }
  return moe;
}

absl::StatusOr<MixtureOfExperts> MixtureOfExperts::LoadStacked(WeightStore& w, const std::string& p,
                                                               const ModelConfig& config,
                                                               const TensorShard& shard) {
  MixtureOfExperts moe = Shaped(config, shard);
  const int64_t h = config.hidden_size, i = config.expert_intermediate_size, e = config.num_experts;
  TANDEM_ASSIGN_OR_RETURN(moe.router_, w.Matrix(p + "router.layer.weight", e, h));
  TANDEM_ASSIGN_OR_RETURN(moe.gate_up_, w.Matrices(p + "input_linear.weight", e, 2 * i, h,
                                                   ShardSegments(shard, {i, i}, 1)));
  TANDEM_ASSIGN_OR_RETURN(
      moe.down_, w.Matrices(p + "output_linear.weight", e, h, i, ShardSegments(shard, {i}, 2)));
  return moe;
}

absl::StatusOr<MixtureOfExperts> MixtureOfExperts::LoadNemotronH(WeightStore& w,
                                                                 const std::string& p,
                                                                 const ModelConfig& config,
                                                                 const TensorShard& shard) {
  MixtureOfExperts moe = Shaped(config, shard);
  const int64_t h = config.hidden_size, i = config.expert_intermediate_size, e = config.num_experts;
  const int64_t width = moe.width_;
  const TensorSlice channels = ShardSegments(shard, {i});
  // The choice ranks near-equal sigmoids by a small bias: the router keeps the checkpoint's
  // precision under any --weight-dtype, as transformers keeps it in fp32.
  TANDEM_ASSIGN_OR_RETURN(moe.router_, w.ExactMatrix(p + "gate.weight", e, h));
  TANDEM_ASSIGN_OR_RETURN(moe.routing_.bias, w.Get(p + "gate.e_score_correction_bias", {e}));
  if (w.Has(p + "experts.up_proj")) {
    TANDEM_ASSIGN_OR_RETURN(moe.gate_up_,
                            w.Matrices(p + "experts.up_proj", e, i, width, channels.Along(1)));
    TANDEM_ASSIGN_OR_RETURN(moe.down_,
                            w.Matrices(p + "experts.down_proj", e, width, i, channels.Along(2)));
  } else {
    for (int64_t x = 0; x < e; ++x) {
      const std::string ep = absl::StrCat(p, "experts.", x, ".");
      kernels::WeightMatrix up;
      kernels::WeightMatrix down;
      TANDEM_ASSIGN_OR_RETURN(up, w.Matrix(ep + "up_proj.weight", i, width, channels));
      TANDEM_ASSIGN_OR_RETURN(down, w.Matrix(ep + "down_proj.weight", width, i, channels.Along(1)));
      moe.gate_up_.push_back(up);
      moe.down_.push_back(down);
    }
  }
  if (config.expert_latent_size > 0) {
    TANDEM_ASSIGN_OR_RETURN(moe.to_latent_, w.Matrix(p + "fc1_latent_proj.weight", width, h));
    TANDEM_ASSIGN_OR_RETURN(moe.from_latent_, w.Matrix(p + "fc2_latent_proj.weight", h, width));
    if (config.ffn_bias) {
      TANDEM_ASSIGN_OR_RETURN(moe.to_latent_bias_, w.Get(p + "fc1_latent_proj.bias", {width}));
      TANDEM_ASSIGN_OR_RETURN(moe.from_latent_bias_, w.Get(p + "fc2_latent_proj.bias", {h}));
    }
  }
  return moe;
}

void MixtureOfExperts::Forward(const ForwardContext& ctx, const float* x, float* out) const {
  const bool latent = to_latent_.data != nullptr;
  kernels::MoeArgs args;
  args.tokens = ctx.rows;
  args.hidden = width_;
  args.intermediate = intermediate_;
  args.num_experts = static_cast<int32_t>(gate_up_.size());
  args.top_k = top_k_;
  args.routing = routing_;
  args.gated = gated_;
  args.act = act_;
  args.x = x;
  args.ld_x = hidden_;
  args.router = router_;
  args.gate_up = gate_up_.data();
  args.down = down_.data();
  args.out = out;
  args.ld_out = hidden_;
  if (latent) {
    // The router reads the hidden state; the experts, its projection.
    float* projected = ctx.ws.Floats(ctx.rows * width_);
    ctx.ops.Linear(x, hidden_, ctx.rows, to_latent_, to_latent_bias_, projected, width_);
    args.route_x = x;
    args.ld_route_x = hidden_;
    args.x = projected;
    args.ld_x = width_;
    args.out = ctx.ws.Floats(ctx.rows * width_);
    args.ld_out = width_;
  }
  ctx.ops.Moe(args, ctx.ws);
  if (latent) {
    // The experts' partial sums project to partial sums: the bias is added once.
    ctx.ops.Linear(args.out, width_, ctx.rows, from_latent_,
                   ctx.adds_output_bias() ? from_latent_bias_ : nullptr, out, hidden_);
  }
}

}  // namespace tandem::models
