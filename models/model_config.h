// What a checkpoint's config.json (and generation_config.json) says about the model, normalised
// into one family-independent description: a list of layers, each with a mixer (attention,
// Mamba-1 or Mamba-2) and an optional feed-forward part, plus the dimensions of each kind.
// The layer graph (models/model.h) and the state layout (models/state_layout.h) are built from it.
#ifndef TANDEM_MODELS_MODEL_CONFIG_H_
#define TANDEM_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/ops.h"
#include "nlohmann/json_fwd.hpp"

namespace tandem::models {

enum class Family { kJamba, kZamba2, kMamba2, kGraniteHybrid, kNemotronH, kBamba };
std::string FamilyName(Family family);

// kNone: a layer that is a feed-forward block alone (Nemotron-H's MLP layers).
enum class MixerKind { kAttention, kMamba1, kMamba2, kNone };
enum class FfnKind { kNone, kDense, kMoe };

struct AttentionDims {
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int32_t input_width = 0;  // H (Jamba) or 2H (Zamba2's concat(hidden, embedding))
  bool rope = false;
  float rope_theta = 10000.0f;
  // Dimensions RoPE rotates at the start of each head, the rest passing through (Bamba rotates
  // half); 0 = all of head_dim.
  int32_t rope_dims = 0;
  float scale = 1.0f;  // softmax scale
};

struct Mamba1Dims {
  int32_t inner = 0;       // din
  int32_t state_size = 0;  // N
  int32_t conv_kernel = 0;
  int32_t dt_rank = 0;
  bool conv_bias = true;
  bool proj_bias = false;
};

struct Mamba2Dims {
  int32_t inner = 0;  // din = heads · head_dim
  int32_t heads = 0;
  int32_t head_dim = 0;
  int32_t groups = 0;
  int32_t state_size = 0;
  int32_t conv_kernel = 0;
  int32_t chunk_size = 256;
  bool conv_bias = true;
  bool proj_bias = false;
  int32_t norm_groups =
      1;  // gated-norm groups: Zamba2 normalises per B/C group, HF Mamba2 does not
  float norm_eps = 1e-5f;
  float dt_min = 0.0f;  // clamp of dt after softplus; dt_max <= 0 means no upper clamp
  float dt_max = 0.0f;
  int32_t conv_channels() const { return inner + 2 * groups * state_size; }
  int32_t in_proj_width() const { return 2 * inner + 2 * groups * state_size + heads; }
};

struct LayerSpec {
  MixerKind mixer = MixerKind::kMamba2;
  FfnKind ffn = FfnKind::kNone;
  int32_t attention_index = -1;  // index among layers that own KV (Jamba attention, Zamba2 hybrid)
  int32_t ssm_index = -1;        // index among SSM layers
  // Zamba2: the shared transformer block runs before this layer's Mamba-2 mixer.
  bool zamba2_hybrid = false;
  int32_t hybrid_position = -1;  // k, position in hybrid_layer_ids: selects the adapters
  int32_t shared_block = -1;     // k mod num_mem_blocks: selects the shared weights
};

// How Zamba2's dt is clamped. The model as trained has no clamp; the
// transformers v4 CPU path clamps to time_step_min in prefill and decode alike.
enum class Zamba2DtClamp { kNone, kTimeStepMin };

struct ConfigOptions {
  Zamba2DtClamp zamba2_dt_clamp = Zamba2DtClamp::kNone;
};

struct ModelConfig {
  Family family = Family::kJamba;
  std::string architecture;  // e.g. "JambaForCausalLM"
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t num_layers = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;

  AttentionDims attention;
  Mamba1Dims mamba1;
  Mamba2Dims mamba2;

  // Feed-forward (Jamba dense MLP and experts; Zamba2's shared-block MLP; Nemotron-H's MLP
  // layers and experts, which are ungated: down(act(up·x)), with biases when ffn_bias, the
  // experts excepted).
  int32_t intermediate_size = 0;
  kernels::Activation ffn_activation = kernels::Activation::kSilu;
  bool ffn_gated = true;
  bool ffn_bias = false;
  int32_t num_experts = 0;
  int32_t experts_per_token = 0;
  int32_t expert_intermediate_size = 0;  // each expert's I
  // How the router picks experts (kernels/ops.h; a correction bias, when the rule has one, is a
  // weight of each layer's). Jamba keeps the top-k of a softmax over every expert as they are;
  // Granite renormalises them; Nemotron 3 scores by sigmoid, in groups, scaled.
  kernels::MoeRouting expert_routing;
  // Nemotron 3: the experts run on a projection of the hidden state to this width, projected
  // back after (0 = no projection).
  int32_t expert_latent_size = 0;
  // An always-on MLP beside the experts (Granite's gated one, which also runs alone in a model
  // without experts; Nemotron 3's plain shared expert): its intermediate size, 0 = none.
  int32_t shared_mlp_intermediate = 0;

  // Granite's scalar multipliers (1 elsewhere): embeddings × embedding_multiplier, each
  // sub-layer's output × residual_multiplier before its residual add, logits ÷ logits_scaling.
  float embedding_multiplier = 1.0f;
  float residual_multiplier = 1.0f;
  float logits_scaling = 1.0f;

  // Zamba2 shared blocks.
  int32_t num_mem_blocks = 0;
  bool attention_adapter = false;
  int32_t adapter_rank = 0;
  std::vector<int32_t> hybrid_layer_ids;

  std::vector<LayerSpec> layers;
  int32_t num_attention_layers = 0;  // layers owning KV
  int32_t num_ssm_layers = 0;

  int32_t bos_token_id = -1;
  int32_t pad_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  MixerKind ssm_kind() const {
    return family == Family::kJamba ? MixerKind::kMamba1 : MixerKind::kMamba2;
  }
};

// Parses a config.json object. `source` names the file in error messages. Unknown architectures
// are refused with their name; missing or out-of-range fields name the field.
absl::StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& config,
                                             const std::string& source,
                                             const ConfigOptions& options = {});

// Reads DIR/config.json and, when present, DIR/generation_config.json (its eos_token_id wins).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir,
                                            const ConfigOptions& options = {});

}  // namespace tandem::models

#endif  // TANDEM_MODELS_MODEL_CONFIG_H_
