#include "cache/model_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::cache {
namespace {

// Marconi's default hybrid (NVIDIA's Attention-Mamba2 7B): 4 attention, 24 Mamba-2 and 28 MLP
// layers, d = 4096, N = 128. Attention is MHA with 32 heads of 128; the Mamba-2 layers use
// expand 2 and head dim 64; the MLP is a plain 4d up/down projection.
ModelSpec Marconi7b() {
  ModelSpec s;
  s.name = "marconi-7b";
  s.attention = {.layers = 4,
                 .input_width = 4096,
                 .output_width = 4096,
                 .heads = 32,
                 .kv_heads = 32,
                 .head_dim = 128};
  s.ssm = {.layers = 24,
           .kind = SsmKind::kMamba2,
           .hidden = 4096,
           .d_inner = 8192,
           .d_state = 128,
           .d_conv = 4,
           .heads = 128,
           .groups = 1};
  s.ffn = {.dense_layers = 28, .hidden = 4096, .intermediate = 16384, .matrices = 2};
  return s;
}

// ai21labs/AI21-Jamba-1.5-Mini: 32 layers, attention at 4/12/20/28, Mamba-1
// elsewhere, MoE (16 experts, top 2) on odd layers, dense SwiGLU on even ones.
ModelSpec Jamba15Mini() {
  ModelSpec s;
  s.name = "jamba-1.5-mini";
  s.attention = {.layers = 4,
                 .input_width = 4096,
                 .output_width = 4096,
                 .heads = 32,
                 .kv_heads = 8,
                 .head_dim = 128};
  s.ssm = {.layers = 28,
           .kind = SsmKind::kMamba1,
           .hidden = 4096,
           .d_inner = 8192,
           .d_state = 16,
           .d_conv = 4,
           .dt_rank = 256};
  s.ffn = {.dense_layers = 16,
           .hidden = 4096,
           .intermediate = 14336,
           .matrices = 3,
           .moe_layers = 16,
           .experts = 16,
           .top_k = 2,
           .expert_intermediate = 14336};
  return s;
}

// Zyphra/Zamba2-7B: 81 Mamba-2 layers; 13 hybrid layers run the shared
// attention (MHA over a 2H-wide input, q/k/v LoRA) and the shared MLP with its LoRA and the
// per-layer linear.
ModelSpec Zamba27b() {
  ModelSpec s;
  s.name = "zamba2-7b";
  constexpr int64_t h = 3584, inter = 14336, rank = 128;
  constexpr int hybrid = 13;
  s.attention = {.layers = hybrid,
                 .input_width = 2 * h,
                 .output_width = h,
                 .heads = 32,
                 .kv_heads = 32,
                 .head_dim = 224,
                 .lora_rank = rank};
  s.ssm = {.layers = 81,
           .kind = SsmKind::kMamba2,
           .hidden = h,
           .d_inner = 2 * h,
           .d_state = 64,
           .d_conv = 4,
           .heads = 112,
           .groups = 2};
  s.ffn = {.dense_layers = hybrid, .hidden = h, .intermediate = inter, .matrices = 3};
  const double mlp_lora = 2.0 * rank * (h + 2 * inter);
  const double linear = 2.0 * h * h;
  s.extra_flops_per_token = hybrid * (mlp_lora + linear);
  return s;
}

double AttentionProjectionFlops(const AttentionDims& a) {
  const double q = double(a.heads) * a.head_dim, kv = double(a.kv_heads) * a.head_dim;
  double f = 2.0 * a.input_width * (q + 2 * kv) + 2.0 * q * a.output_width;
  if (a.lora_rank > 0) f += 3.0 * 2.0 * a.lora_rank * (a.input_width + a.input_width);
  return f;
}

double SsmPrefillFlops(const SsmDims& s) {
  const double h = s.hidden, din = s.d_inner, n = s.d_state, k = s.d_conv;
  if (s.kind == SsmKind::kMamba1) {
    const double r = s.dt_rank;
    return 4 * h * din + 2 * k * din + 2 * din * (r + 2 * n) + 2 * r * din + 7 * din * n +
           2 * din * h;
  }
  const double g = s.groups, conv_dim = din + 2 * g * n, q = s.chunk;
  const double base =
      2 * h * (2 * din + 2 * g * n + s.heads) + 2 * k * conv_dim + 2 * din * h + 8 * din;
  return base + din * (q + 4 * n) + g * n * q;
}

double FfnFlops(const FfnDims& f) {
  const double h = f.hidden;
  double total = f.dense_layers * (2.0 * f.matrices * h * f.intermediate);
  if (f.moe_layers > 0) {
    const double ie = f.expert_intermediate > 0 ? f.expert_intermediate : f.intermediate;
    // Experts on a latent width pay its two projections instead of their full width.
    const double width = f.expert_width > 0 ? f.expert_width : h;
    const double latent = f.expert_width > 0 ? 2.0 * 2.0 * h * width : 0.0;
    const double per = 2.0 * h * f.experts + f.top_k * 2.0 * f.matrices * width * ie + latent +
                       2.0 * f.matrices * h * f.shared_intermediate;
    total += f.moe_layers * per;
  }
  return total;
}

}  // namespace

absl::StatusOr<ModelSpec> ModelSpec::Builtin(const std::string& name) {
  if (name == "marconi-7b") return Marconi7b();
  if (name == "jamba-1.5-mini") return Jamba15Mini();
  if (name == "zamba2-7b") return Zamba27b();
  return absl::NotFoundError(absl::StrCat(
      "unknown model spec '", name, "' (built-in: ", absl::StrJoin(BuiltinNames(), ", "), ")"));
}

std::vector<std::string> ModelSpec::BuiltinNames() {
  return {"marconi-7b", "jamba-1.5-mini", "zamba2-7b"};
}

absl::Status ModelSpec::Validate() const {
  auto bad = [&](const std::string& field) {
    return absl::InvalidArgumentError(absl::StrCat("model spec '", name, "': ", field));
  };
  if (attention.layers < 0 || ssm.layers < 0 || ffn.dense_layers < 0 || ffn.moe_layers < 0) {
    return bad("layer counts must be non-negative");
  }
  if (attention.layers == 0 && ssm.layers == 0) return bad("no attention and no SSM layers");
  if (attention.layers > 0) {
    if (attention.input_width <= 0) return bad("attention.input_width must be positive");
    if (attention.output_width <= 0) return bad("attention.output_width must be positive");
    if (attention.heads <= 0) return bad("attention.heads must be positive");
    if (attention.kv_heads <= 0) return bad("attention.kv_heads must be positive");
    if (attention.head_dim <= 0) return bad("attention.head_dim must be positive");
    if (attention.lora_rank < 0) return bad("attention.lora_rank must be non-negative");
  }
  if (ssm.layers > 0) {
    if (ssm.hidden <= 0) return bad("ssm.hidden must be positive");
    if (ssm.d_inner <= 0) return bad("ssm.d_inner must be positive");
    if (ssm.d_state <= 0) return bad("ssm.d_state must be positive");
    if (ssm.d_conv < 1) return bad("ssm.d_conv must be at least 1");
    if (ssm.kind == SsmKind::kMamba1 && ssm.dt_rank <= 0)
      return bad("ssm.dt_rank must be positive");
    if (ssm.kind == SsmKind::kMamba2) {
      if (ssm.heads <= 0) return bad("ssm.heads must be positive");
      if (ssm.groups <= 0) return bad("ssm.groups must be positive");
      if (ssm.chunk <= 0) return bad("ssm.chunk must be positive");
    }
  }
  if ((ffn.dense_layers > 0 || ffn.moe_layers > 0) && ffn.hidden <= 0) {
    return bad("ffn.hidden must be positive");
  }
  if (ffn.matrices != 2 && ffn.matrices != 3) return bad("ffn.matrices must be 2 or 3");
  if (ffn.moe_layers > 0 && (ffn.experts <= 0 || ffn.top_k <= 0 || ffn.top_k > ffn.experts)) {
    return bad("ffn MoE needs 0 < top_k <= experts");
  }
  if (extra_flops_per_token < 0) return bad("extra_flops_per_token must be non-negative");
  if (kv_dtype_bytes <= 0 || conv_dtype_bytes <= 0 || ssm_dtype_bytes <= 0) {
    return bad("dtype sizes must be positive");
  }
  return absl::OkStatus();
}

size_t ModelSpec::kv_bytes_per_token() const {
  if (attention.layers == 0) return 0;
  return size_t(attention.layers) * 2 * attention.kv_heads * attention.head_dim * kv_dtype_bytes;
}

size_t ModelSpec::ssm_state_bytes() const {
  if (ssm.layers == 0) return 0;
  const int64_t conv_channels =
      ssm.kind == SsmKind::kMamba1 ? ssm.d_inner : ssm.d_inner + 2 * ssm.groups * ssm.d_state;
  const size_t conv = size_t(conv_channels) * (ssm.d_conv - 1) * conv_dtype_bytes;
  const size_t state = size_t(ssm.d_inner) * ssm.d_state * ssm_dtype_bytes;
  return size_t(ssm.layers) * (conv + state);
}

double ModelSpec::fixed_flops_per_token() const {
  double f = extra_flops_per_token + FfnFlops(ffn);
  if (attention.layers > 0) f += attention.layers * AttentionProjectionFlops(attention);
  if (ssm.layers > 0) f += ssm.layers * SsmPrefillFlops(ssm);
  return f;
}

double ModelSpec::attention_flops_per_key() const {
  return double(attention.layers) * 4.0 * attention.heads * attention.head_dim;
}

double ModelSpec::PrefillFlops(size_t from, size_t to) const {
  if (to <= from) return 0;
  const double n = double(to - from);
  // Σ_{t=from+1}^{to} t = (to(to+1) − from(from+1)) / 2
  const double keys = (double(to) * (to + 1) - double(from) * (from + 1)) / 2;
  return n * fixed_flops_per_token() + attention_flops_per_key() * keys;
}

}  // namespace tandem::cache
