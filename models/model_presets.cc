#include "models/model_presets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::models {
namespace {

nlohmann::json Jamba100M() {
  return {{"architectures", {"JambaForCausalLM"}},
          {"vocab_size", 16384},
          {"hidden_size", 768},
          {"num_hidden_layers", 12},
          {"num_attention_heads", 12},
          {"num_key_value_heads", 4},
          {"intermediate_size", 1024},
          {"attn_layer_period", 4},
          {"attn_layer_offset", 2},
          {"expert_layer_period", 2},
          {"expert_layer_offset", 1},
          {"num_experts", 4},
          {"num_experts_per_tok", 2},
          {"mamba_d_state", 16},
          {"mamba_d_conv", 4},
          {"mamba_expand", 2},
          {"mamba_dt_rank", 48}};
}
nlohmann::json Zamba2100M() {
  std::vector<std::string> types(14, "mamba");
  types[5] = types[9] = types[13] = "hybrid";
  return {{"architectures", {"Zamba2ForCausalLM"}},
          {"vocab_size", 16384},
          {"hidden_size", 768},
          {"num_hidden_layers", 14},
          {"layers_block_type", types},
          {"mamba_d_state", 64},
          {"mamba_d_conv", 4},
          {"mamba_expand", 2},
          {"mamba_ngroups", 1},
          {"n_mamba_heads", 24},
          {"chunk_size", 256},
          {"num_attention_heads", 12},
          {"intermediate_size", 3072},
          {"num_mem_blocks", 2},
          {"use_shared_attention_adapter", true},
          {"adapter_rank", 64},
          {"use_mem_rope", true}};
}
nlohmann::json Mamba2100M() {
  return {{"architectures", {"Mamba2ForCausalLM"}},
          {"vocab_size", 16384},
          {"hidden_size", 768},
          {"num_hidden_layers", 24},
          {"num_heads", 24},
          {"head_dim", 64},
          {"state_size", 128},
          {"n_groups", 1},
          {"expand", 2},
          {"conv_kernel", 4},
          {"chunk_size", 256}};
}

// Granite-4.0-H-Tiny's proportions at ~100M: attention in 2 of 12 layers (no positional
// encoding), 16 experts top-4 beside a shared MLP, and the checkpoints' multipliers.
nlohmann::json Granite100M() {
  std::vector<std::string> types(12, "mamba");
  types[5] = types[11] = "attention";
  return {{"architectures", {"GraniteMoeHybridForCausalLM"}},
          {"vocab_size", 16384},
          {"hidden_size", 768},
          {"num_hidden_layers", 12},
          {"layer_types", types},
          {"num_attention_heads", 12},
          {"num_key_value_heads", 4},
          {"num_local_experts", 16},
          {"num_experts_per_tok", 4},
          {"intermediate_size", 256},
          {"shared_intermediate_size", 512},
          {"position_embedding_type", "nope"},
          {"embedding_multiplier", 12.0},
          {"residual_multiplier", 0.22},
          {"attention_multiplier", 0.015625},
          {"logits_scaling", 6.0},
          {"mamba_n_heads", 24},
          {"mamba_d_head", 64},
          {"mamba_n_groups", 1},
          {"mamba_d_state", 128},
          {"mamba_d_conv", 4},
          {"mamba_expand", 2},
          {"mamba_chunk_size", 256},
          {"tie_word_embeddings", true}};
}

// Nemotron-H-8B's proportions at ~100M: Mamba-2 and MLP layers alternating, attention in 2 of
// 20 layers, relu² MLPs 4× wide, 8 B/C groups.
nlohmann::json NemotronH100M() {
  return {{"architectures", {"NemotronHForCausalLM"}},
          {"vocab_size", 16384},
          {"hidden_size", 768},
          {"num_hidden_layers", 20},
          {"hybrid_override_pattern", "M-M-M*-M-M-M-M*-M-M-"},
          {"num_attention_heads", 12},
          {"num_key_value_heads", 4},
          {"head_dim", 64},
          {"mamba_num_heads", 24},
          {"mamba_head_dim", 64},
          {"n_groups", 8},
          {"ssm_state_size", 128},
          {"conv_kernel", 4},
          {"chunk_size", 128},
          {"intermediate_size", 3072},
          {"mlp_hidden_act", "relu2"}};
}

// Nemotron 3 Nano's proportions (hidden 2688, 52 layers, 128 experts of which 6 run, beside a
// shared expert of twice their width, weights ×2.5) at 100M-scale: expert layers between the
// Mamba-2 ones, attention every sixth or seventh layer, 16 experts of which 4 run.
nlohmann::json Nemotron3100M() {
  return {{"architectures", {"NemotronHForCausalLM"}},
          {"vocab_size", 16384},
          {"hidden_size", 768},
          {"hybrid_override_pattern", "MEMEM*EMEMEM*EMEMEME"},
          {"num_attention_heads", 12},
          {"num_key_value_heads", 2},
          {"head_dim", 64},
          {"mamba_num_heads", 24},
          {"mamba_head_dim", 64},
          {"n_groups", 8},
          {"ssm_state_size", 128},
          {"conv_kernel", 4},
          {"chunk_size", 128},
          {"n_routed_experts", 16},
          {"num_experts_per_tok", 4},
          {"moe_intermediate_size", 256},
          {"moe_shared_expert_intermediate_size", 512},
          {"routed_scaling_factor", 2.5},
          {"mlp_hidden_act", "relu2"}};
}

// Bamba-9B's proportions (hidden 4096, 32 layers of which 3 attention, a gated MLP 3.5× wide
// after every layer, Mamba-2 with 128 heads of 64, one group, N 128) at 100M-scale.
nlohmann::json Bamba100M() {
  return {{"architectures", {"BambaForCausalLM"}},
          {"vocab_size", 16384},
          {"hidden_size", 768},
          {"num_hidden_layers", 12},
          {"attn_layer_indices", {3, 8}},
          {"num_attention_heads", 12},
          {"num_key_value_heads", 4},
          {"intermediate_size", 2688},
          {"mamba_n_heads", 24},
          {"mamba_n_groups", 1},
          {"mamba_d_state", 128},
          {"mamba_d_conv", 4},
          {"mamba_expand", 2},
          {"mamba_chunk_size", 256}};
}

}  // namespace

std::vector<std::string> ModelPresetNames() {
  return {"jamba-100m",      "zamba2-100m",    "mamba2-100m", "granite-100m",
          "nemotron-h-100m", "nemotron3-100m", "bamba-100m"};
}

absl::StatusOr<nlohmann::json> ModelPresetJson(const std::string& name) {
  if (name == "jamba-100m") return Jamba100M();
  if (name == "zamba2-100m") return Zamba2100M();
  if (name == "mamba2-100m") return Mamba2100M();
  if (name == "granite-100m") return Granite100M();
  if (name == "nemotron-h-100m") return NemotronH100M();
  if (name == "nemotron3-100m") return Nemotron3100M();
  if (name == "bamba-100m") return Bamba100M();
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model preset '", name, "' (known: ", absl::StrJoin(ModelPresetNames(), ", "), ")"));
}

absl::StatusOr<ModelConfig> ModelPreset(const std::string& name) {
  absl::StatusOr<nlohmann::json> json = ModelPresetJson(name);
  if (!json.ok()) return json.status();
  return ParseModelConfig(*json, "preset " + name);
}

absl::StatusOr<std::unique_ptr<Model>> RandomPresetModel(const std::string& name, uint64_t seed,
                                                         const LoadOptions& options) {
  absl::StatusOr<ModelConfig> config = ModelPreset(name);
  if (!config.ok()) return config.status();
  return Model::CreateRandom(*config, seed, options);
}

}  // namespace tandem::models
