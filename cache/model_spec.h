// The dimensions of a model that the cache needs: how many bytes one token of KV and one SSM
// checkpoint take, and how many FLOPs a prefix costs to recompute. The cache never runs a model;
// engine/ maps a model directory's config.json into a ModelSpec, and a few well-known models are
// built in by name. FLOPs count the forward pass, 2 FLOPs per multiply-accumulate. Unlike the
// Marconi prototype, the MLP term is not mixed with attention FLOPs, SSM state is d_inner·N (not
// D·N), and the conv state holds d_conv − 1 columns.
#ifndef TANDEM_CACHE_MODEL_SPEC_H_
#define TANDEM_CACHE_MODEL_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::cache {

// Attention layers (all identical). Zamba2's shared attention reads a 2H-wide input.
struct AttentionDims {
  int layers = 0;
  int64_t input_width = 0;   // D_in: H for Jamba/Granite, 2H for Zamba2
  int64_t output_width = 0;  // width o_proj writes (H)
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t lora_rank = 0;  // Zamba2 q/k/v LoRA adapters; 0 = none
};

enum class SsmKind : uint8_t { kMamba1, kMamba2 };

// SSM (Mamba) mixer layers (all identical).
struct SsmDims {
  int layers = 0;
  SsmKind kind = SsmKind::kMamba2;
  int64_t hidden = 0;   // H
  int64_t d_inner = 0;  // din
  int64_t d_state = 0;  // N
  int64_t d_conv = 4;   // K
  int64_t dt_rank = 0;  // Mamba-1 only (R)
  int64_t heads = 0;    // Mamba-2 only (nhm)
  int64_t groups = 1;   // Mamba-2 only (g)
  int64_t chunk = 256;  // Mamba-2 SSD chunk length (Q) used for prefill FLOPs
};

// Feed-forward layers: dense MLPs and mixture-of-experts layers (active experts only).
struct FfnDims {
  int dense_layers = 0;
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int matrices = 3;  // 3 for gated (SwiGLU/GeGLU) MLPs, 2 for a plain up/down MLP
  int moe_layers = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t expert_intermediate = 0;  // per-expert I; defaults to `intermediate` when 0
  int64_t shared_intermediate = 0;  // Granite's shared MLP, Nemotron 3's shared expert; 0 = none
  // The experts' input width when they run on a latent projection of the hidden state
  // (Nemotron 3's moe_latent_size); 0 = hidden.
  int64_t expert_width = 0;
};

struct ModelSpec {
  std::string name;
  AttentionDims attention;
  SsmDims ssm;
  FfnDims ffn;
  // Context-independent FLOPs per token not covered above (e.g. Zamba2's per-hybrid-layer
  // linear and MLP LoRA adapters).
  double extra_flops_per_token = 0;
  int kv_dtype_bytes = 2;    // bf16 KV
  int conv_dtype_bytes = 2;  // conv state in the activation dtype
  int ssm_dtype_bytes = 4;   // SSM state kept in fp32

  // The built-in specs: "marconi-7b", "jamba-1.5-mini", "zamba2-7b".
  static absl::StatusOr<ModelSpec> Builtin(const std::string& name);
  static std::vector<std::string> BuiltinNames();

  // INVALID_ARGUMENT naming the first inconsistent field.
  absl::Status Validate() const;

  bool has_attention() const { return attention.layers > 0; }
  bool has_ssm() const { return ssm.layers > 0; }

  // K and V of one token over all attention layers.
  size_t kv_bytes_per_token() const;
  // One checkpoint: conv state (d_conv − 1 columns) + SSM state over all SSM layers.
  size_t ssm_state_bytes() const;

  // FLOPs of one prefill token that do not depend on its position (all layers).
  double fixed_flops_per_token() const;
  // Extra FLOPs per token per attended key (A below).
  double attention_flops_per_key() const;
  // FLOPs to prefill tokens [from, to) given the state at `from`: each token t (1-based) costs
  // fixed + A·t.
  double PrefillFlops(size_t from, size_t to) const;
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_MODEL_SPEC_H_
