#include "engine/cache_model_spec.h"

#include "models/status_macros.h"

namespace tandem::engine {

absl::StatusOr<cache::ModelSpec> CacheModelSpecFor(const models::ModelConfig& c,
                                                   const std::string& name) {
  cache::ModelSpec spec;
  spec.name = name;
  // The CPU engine keeps KV, conv and SSM state in fp32.
  spec.kv_dtype_bytes = 4;
  spec.conv_dtype_bytes = 4;
  spec.ssm_dtype_bytes = 4;
  const int64_t h = c.hidden_size;

  if (c.num_attention_layers > 0) {
    spec.attention.layers = c.num_attention_layers;
    spec.attention.input_width = c.attention.input_width;
    spec.attention.output_width = h;
    spec.attention.heads = c.attention.heads;
    spec.attention.kv_heads = c.attention.kv_heads;
    spec.attention.head_dim = c.attention.head_dim;
    spec.attention.lora_rank = c.attention_adapter ? c.adapter_rank : 0;
  }

  spec.ssm.layers = c.num_ssm_layers;
  spec.ssm.hidden = h;
  if (c.ssm_kind() == models::MixerKind::kMamba1) {
    spec.ssm.kind = cache::SsmKind::kMamba1;
    spec.ssm.d_inner = c.mamba1.inner;
    spec.ssm.d_state = c.mamba1.state_size;
    spec.ssm.d_conv = c.mamba1.conv_kernel;
    spec.ssm.dt_rank = c.mamba1.dt_rank;
  } else {
    spec.ssm.kind = cache::SsmKind::kMamba2;
    spec.ssm.d_inner = c.mamba2.inner;
    spec.ssm.d_state = c.mamba2.state_size;
    spec.ssm.d_conv = c.mamba2.conv_kernel;
    spec.ssm.heads = c.mamba2.heads;
    spec.ssm.groups = c.mamba2.groups;
    spec.ssm.chunk = c.mamba2.chunk_size;
  }

  spec.ffn.hidden = h;
  spec.ffn.intermediate = c.intermediate_size;
  spec.ffn.matrices = c.ffn_gated ? 3 : 2;
  for (const models::LayerSpec& layer : c.layers) {
    if (layer.ffn == models::FfnKind::kDense) ++spec.ffn.dense_layers;
    if (layer.ffn == models::FfnKind::kMoe) ++spec.ffn.moe_layers;
  }
  if (spec.ffn.moe_layers > 0) {
    spec.ffn.experts = c.num_experts;
    spec.ffn.top_k = c.experts_per_token;
    spec.ffn.expert_intermediate = c.expert_intermediate_size;
    spec.ffn.shared_intermediate = c.shared_mlp_intermediate;
    spec.ffn.expert_width = c.expert_latent_size;
  } else if (c.shared_mlp_intermediate > 0) {
    spec.ffn.intermediate = c.shared_mlp_intermediate;  // Granite without experts
  }
  if (c.family == models::Family::kZamba2) {
    // Every hybrid layer runs the shared block's MLP, its MLP adapter and its own H×H linear.
    const double hybrid = static_cast<double>(c.hybrid_layer_ids.size());
    spec.ffn.dense_layers = static_cast<int>(c.hybrid_layer_ids.size());
    spec.extra_flops_per_token =
        hybrid * (2.0 * h * h + 2.0 * c.adapter_rank * (h + 2.0 * c.intermediate_size));
  }
  if (spec.ffn.dense_layers == 0 && spec.ffn.moe_layers == 0) spec.ffn.intermediate = 0;
  TANDEM_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

absl::StatusOr<cache::ModelSpec> LoadCacheModelSpec(const std::string& dir) {
  TANDEM_ASSIGN_OR_RETURN(models::ModelConfig config, models::LoadModelConfig(dir));
  return CacheModelSpecFor(config, dir);
}

}  // namespace tandem::engine
