#include "models/zamba2_shared_block.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::models {
namespace {

absl::StatusOr<std::string> Require(const SharedTensorResolver& resolve, int32_t block,
                                    const std::string& suffix) {
  std::string name = resolve(block, suffix);
  if (name.empty()) {
    return absl::NotFoundError(absl::StrCat("shared block ", block, ": tensor '",
                                            "model.layers.<j>.shared_transformer.", suffix,
                                            "' is missing for every hybrid layer j of the block"));
  }
  return name;
}

}  // namespace

absl::StatusOr<Zamba2SharedBlock> Zamba2SharedBlock::Load(WeightStore& w,
                                                          const SharedTensorResolver& resolve,
                                                          int32_t b, const ModelConfig& config,
                                                          const TensorShard& shard) {
  Zamba2SharedBlock block;
  block.hidden_ = config.hidden_size;
  block.intermediate_ = config.intermediate_size / shard.ranks;
  block.eps_ = config.rms_norm_eps;
  block.act_ = config.ffn_activation;
  const int64_t h = config.hidden_size, i = config.intermediate_size;
  std::string name;
  TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, "input_layernorm.weight"));
  TANDEM_ASSIGN_OR_RETURN(block.input_norm_, w.Get(name, {2 * h}));
  TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, "self_attn.q_proj.weight"));
  // All attention tensors of the block share the prefix of its q_proj.
  const std::string attn_prefix = name.substr(0, name.size() - std::strlen("q_proj.weight"));
  TANDEM_ASSIGN_OR_RETURN(block.attention_, AttentionLayer::Load(w, attn_prefix, config.attention,
                                                                 config.hidden_size, shard));
  TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, "pre_ff_layernorm.weight"));
  TANDEM_ASSIGN_OR_RETURN(block.pre_ff_norm_, w.Get(name, {h}));
  TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, "feed_forward.gate_up_proj.weight"));
  TANDEM_ASSIGN_OR_RETURN(block.gate_up_, w.Matrix(name, 2 * i, h, ShardSegments(shard, {i, i})));
  TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, "feed_forward.down_proj.weight"));
  TANDEM_ASSIGN_OR_RETURN(block.down_, w.Matrix(name, h, i, ShardSegments(shard, {i}, 1)));
  return block;
}

absl::StatusOr<Zamba2Adapters> Zamba2SharedBlock::LoadAdapters(WeightStore& w,
                                                               const SharedTensorResolver& resolve,
                                                               int32_t k, const ModelConfig& config,
                                                               const TensorShard& shard) {
  Zamba2Adapters a;
  const int32_t b = k % config.num_mem_blocks;
  const int64_t h = config.hidden_size, i = config.intermediate_size, r = config.adapter_rank;
  a.rank = config.adapter_rank;
  std::string name;
  const std::string mlp = absl::StrCat("feed_forward.gate_up_proj_adapter_list.", k, ".");
  TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, mlp + "0.weight"));
  TANDEM_ASSIGN_OR_RETURN(a.mlp_down, w.Matrix(name, r, h));
  TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, mlp + "1.weight"));
  TANDEM_ASSIGN_OR_RETURN(a.mlp_up, w.Matrix(name, 2 * i, r, ShardSegments(shard, {i, i})));

  if (config.attention_adapter) {
    const AttentionDims& d = config.attention;
    const int64_t widths[3] = {int64_t{d.heads} * d.head_dim, int64_t{d.kv_heads} * d.head_dim,
                               int64_t{d.kv_heads} * d.head_dim};
    const char* names[3] = {"q", "k", "v"};
    QkvAdapter qkv;
    qkv.rank = config.adapter_rank;
    std::vector<WeightStore::Part> down_parts;
    for (int j = 0; j < 3; ++j) {
      const std::string list =
          absl::StrCat("self_attn.linear_", names[j], "_adapter_list.", k, ".");
      TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, list + "0.weight"));
      down_parts.push_back({name, r});
      TANDEM_ASSIGN_OR_RETURN(name, Require(resolve, b, list + "1.weight"));
      TANDEM_ASSIGN_OR_RETURN(
          qkv.up[j], w.Matrix(name, widths[j], r,
                              j == 0 ? ShardSegments(shard, {widths[j]}) : KvHeadRows(d, shard)));
    }
    TANDEM_ASSIGN_OR_RETURN(qkv.down, w.Stack(down_parts, d.input_width));
    a.attention = qkv;
  }
  return a;
}

void Zamba2SharedBlock::Forward(const ForwardContext& ctx, const float* hidden,
                                const float* embedding, const Zamba2Adapters& adapters,
                                int32_t attention_index, float* out) const {
  kernels::Ops& ops = ctx.ops;
  const int64_t rows = ctx.rows, h = hidden_, i = intermediate_, r = adapters.rank;

  // concat(hidden, embedding) → RMSNorm over 2H.
  float* c = ctx.ws.Floats(rows * 2 * h);
  ops.CopyRows(hidden, h, rows, h, c, 2 * h);
  ops.CopyRows(embedding, h, rows, h, c + h, 2 * h);
  float* cn = ctx.ws.Floats(rows * 2 * h);
  ops.RmsNorm(c, 2 * h, rows, 2 * h, input_norm_, eps_, cn, 2 * h);

  float* attn = ctx.ws.Floats(rows * h);
  attention_.Forward(ctx, cn, adapters.attention ? &*adapters.attention : nullptr, attention_index,
                     attn);
  ctx.AllReduce(attn, rows * h);
  float* a = ctx.ws.Floats(rows * h);
  ops.RmsNorm(attn, h, rows, h, pre_ff_norm_, eps_, a, h);

  // gate‖up projection plus this position's LoRA adapter, then act(gate)·up and down.
  float* gu = ctx.ws.Floats(rows * 2 * i);
  ops.Linear(a, h, rows, gate_up_, nullptr, gu, 2 * i);
  float* t = ctx.ws.Floats(rows * r);
  ops.Linear(a, h, rows, adapters.mlp_down, nullptr, t, r);
  float* delta = ctx.ws.Floats(rows * 2 * i);
  ops.Linear(t, r, rows, adapters.mlp_up, nullptr, delta, 2 * i);
  ops.AddRows(delta, 2 * i, rows, 2 * i, gu, 2 * i);
  float* act = ctx.ws.Floats(rows * i);
  ops.GatedActivation(act_, gu, 2 * i, gu + i, 2 * i, rows, i, act, i);
  ops.Linear(act, i, rows, down_, nullptr, out, h);
}

}  // namespace tandem::models
