#include "models/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/moe_routing.h"
#include "models/json_file.h"
#include "models/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem::models {
namespace {

using Json = nlohmann::json;

// Typed access to config fields with errors that name the file and the field.
class Fields {
 public:
  Fields(const Json& json, const std::string& source) : json_(json), source_(source) {}

  absl::Status Error(const std::string& field, const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", field, "' ", problem));
  }
  bool Has(const char* key) const { return json_.contains(key) && !json_[key].is_null(); }

  absl::StatusOr<int64_t> Int(const char* key,
                              std::optional<int64_t> fallback = std::nullopt) const {
    if (!Has(key)) {
      if (fallback) return *fallback;
      return Error(key, "is missing");
    }
    const Json& v = json_[key];
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) {
      return static_cast<int64_t>(v.get<double>());
    }
    return Error(key, absl::StrCat("must be an integer, found ", v.dump()));
  }

  absl::StatusOr<int32_t> Positive(const char* key,
                                   std::optional<int64_t> fallback = std::nullopt) const {
    auto v = Int(key, fallback);
    if (!v.ok()) return v.status();
    const int64_t limit = UpperLimit(key);
    if (*v <= 0 || *v > limit) {
      return Error(key, absl::StrCat("must be in [1, ", limit, "], found ", *v));
    }
    return static_cast<int32_t>(*v);
  }

  // Far above any real model, low enough that no product of dimensions the graph forms
  // overflows and that an absurd layer count cannot exhaust memory before the weights are read.
  static int64_t UpperLimit(std::string_view key) {
    if (key == "vocab_size") return int64_t{1} << 24;
    if (key == "num_hidden_layers") return 4096;
    if (key == "intermediate_size" || key == "shared_intermediate_size" ||
        key == "moe_intermediate_size" || key == "moe_shared_expert_intermediate_size") {
      return int64_t{1} << 20;
    }
    if (key == "mamba_expand" || key == "expand" || key == "mamba_d_conv" ||
        key == "conv_kernel") {
      return 64;
    }
    if (key == "hidden_size" || key == "attention_hidden_size" || key == "mamba_dt_rank" ||
        key == "chunk_size" || key == "mamba_chunk_size") {
      return int64_t{1} << 17;
    }
    return int64_t{1} << 14;  // head counts, head dims, groups, state sizes, experts, ranks
  }

  absl::StatusOr<double> Number(const char* key, std::optional<double> fallback) const {
    if (!Has(key)) {
      if (fallback) return *fallback;
      return Error(key, "is missing");
    }
    const Json& v = json_[key];
    if (!v.is_number()) return Error(key, absl::StrCat("must be a number, found ", v.dump()));
    return v.get<double>();
  }

  absl::StatusOr<bool> Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    const Json& v = json_[key];
    if (!v.is_boolean()) return Error(key, absl::StrCat("must be true or false, found ", v.dump()));
    return v.get<bool>();
  }

  absl::StatusOr<std::string> String(const char* key, std::string fallback) const {
    if (!Has(key)) return fallback;
    const Json& v = json_[key];
    if (!v.is_string()) return Error(key, absl::StrCat("must be a string, found ", v.dump()));
    return v.get<std::string>();
  }

  // An id or a list of ids (eos_token_id may be either).
  absl::StatusOr<std::vector<int32_t>> IdList(const char* key) const {
    std::vector<int32_t> ids;
    if (!Has(key)) return ids;
    const Json& v = json_[key];
    auto add = [&](const Json& e) -> absl::Status {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
          e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return Error(key, absl::StrCat("must hold non-negative token ids, found ", e.dump()));
      }
      ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
      return absl::OkStatus();
    };
    if (v.is_array()) {
      for (const Json& e : v) {
        if (absl::Status s = add(e); !s.ok()) return s;
      }
    } else if (absl::Status s = add(v); !s.ok()) {
      return s;
    }
    return ids;
  }

  const Json& json() const { return json_; }
  const std::string& source() const { return source_; }

 private:
  const Json& json_;
  const std::string& source_;
};

absl::StatusOr<kernels::Activation> ParseActivation(const Fields& f, const char* key,
                                                    const char* fallback) {
  std::string name;
  TANDEM_ASSIGN_OR_RETURN(name, f.String(key, fallback));
  if (name == "silu" || name == "swish") return kernels::Activation::kSilu;
  if (name == "gelu") return kernels::Activation::kGelu;
  return f.Error(
      key, absl::StrCat("names an unsupported activation '", name, "' (supported: silu, gelu)"));
}

absl::Status RequireDivides(const Fields& f, const char* key, int64_t divisor,
                            const std::string& what, int64_t value) {
  if (divisor <= 0 || value % divisor != 0) {
    return f.Error(key, absl::StrCat("= ", divisor, " must divide ", what, " = ", value));
  }
  return absl::OkStatus();
}

// rope_theta, at the top level (transformers v4) or inside rope_parameters (v5).
absl::StatusOr<double> RopeTheta(const Fields& f) {
  if (f.Has("rope_parameters") && f.json()["rope_parameters"].is_object()) {
    Fields rope(f.json()["rope_parameters"], f.source());
    return rope.Number("rope_theta", 10000.0);
  }
  return f.Number("rope_theta", 10000.0);
}

// A multiplier (of the residual stream, the logits, the attention scores): finite and positive,
// 1 when absent.
absl::StatusOr<float> PositiveScalar(const Fields& f, const char* key) {
  double v;
  TANDEM_ASSIGN_OR_RETURN(v, f.Number(key, 1.0));
  if (!(v > 0) || !std::isfinite(static_cast<float>(v))) {
    return f.Error(key, absl::StrCat("must be a positive finite number, found ", v));
  }
  return static_cast<float>(v);
}

// num_attention_heads and num_key_value_heads (absent: `kv_fallback`, or as many as the query
// heads), the latter dividing the former (GQA).
absl::Status ReadAttentionHeads(const Fields& f, std::optional<int64_t> kv_fallback,
                                AttentionDims& a) {
  TANDEM_ASSIGN_OR_RETURN(a.heads, f.Positive("num_attention_heads", 32));
  TANDEM_ASSIGN_OR_RETURN(a.kv_heads,
                          f.Positive("num_key_value_heads", kv_fallback.value_or(a.heads)));
  return RequireDivides(f, "num_key_value_heads", a.kv_heads, "num_attention_heads", a.heads);
}

// attention_bias = true, which no released checkpoint of `family` has, refused by name.
absl::Status RefuseAttentionBias(const Fields& f, const char* family) {
  bool attention_bias;
  TANDEM_ASSIGN_OR_RETURN(attention_bias, f.Bool("attention_bias", false));
  if (!attention_bias) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat(f.source(), ": field 'attention_bias' = true is not supported (no released ",
                   family, " checkpoint has attention biases)"));
}

// The RMSNorm epsilon (under `eps_key`, each family's name for it) and whether the LM head is
// the embedding, with the family's defaults.
absl::Status ReadNormEpsAndTying(const Fields& f, const char* eps_key, double eps_fallback,
                                 bool tied_fallback, ModelConfig& c) {
  double eps;
  TANDEM_ASSIGN_OR_RETURN(eps, f.Number(eps_key, eps_fallback));
  c.rms_norm_eps = static_cast<float>(eps);
  TANDEM_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", tied_fallback));
  return absl::OkStatus();
}

// `layers_fallback`: what num_hidden_layers is when absent (a family that lists its layers).
absl::Status ParseCommon(const Fields& f, ModelConfig& c,
                         std::optional<int64_t> layers_fallback = std::nullopt) {
  TANDEM_ASSIGN_OR_RETURN(c.vocab_size, f.Positive("vocab_size"));
  TANDEM_ASSIGN_OR_RETURN(c.hidden_size, f.Positive("hidden_size"));
  TANDEM_ASSIGN_OR_RETURN(c.num_layers, f.Positive("num_hidden_layers", layers_fallback));
  int64_t bos = -1, pad = -1;
  TANDEM_ASSIGN_OR_RETURN(bos, f.Int("bos_token_id", -1));
  TANDEM_ASSIGN_OR_RETURN(pad, f.Int("pad_token_id", -1));
  c.bos_token_id = static_cast<int32_t>(bos);
  c.pad_token_id = static_cast<int32_t>(pad);
  TANDEM_ASSIGN_OR_RETURN(c.eos_token_ids, f.IdList("eos_token_id"));
  return absl::OkStatus();
}

absl::Status ParseJamba(const Fields& f, ModelConfig& c) {
  c.family = Family::kJamba;
  TANDEM_RETURN_IF_ERROR(ReadNormEpsAndTying(f, "rms_norm_eps", 1e-6, false, c));
  TANDEM_ASSIGN_OR_RETURN(c.intermediate_size, f.Positive("intermediate_size", 14336));
  TANDEM_ASSIGN_OR_RETURN(c.ffn_activation, ParseActivation(f, "hidden_act", "silu"));

  AttentionDims& a = c.attention;
  TANDEM_RETURN_IF_ERROR(ReadAttentionHeads(f, std::nullopt, a));
  if (f.Has("head_dim")) {
    TANDEM_ASSIGN_OR_RETURN(a.head_dim, f.Positive("head_dim"));
  } else {
    if (absl::Status s =
            RequireDivides(f, "num_attention_heads", a.heads, "hidden_size", c.hidden_size);
        !s.ok()) {
      return s;
    }
    a.head_dim = c.hidden_size / a.heads;
  }
  a.input_width = c.hidden_size;
  a.rope = false;  // Jamba has no positional encoding at all
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));

  Mamba1Dims& m = c.mamba1;
  int32_t expand;
  TANDEM_ASSIGN_OR_RETURN(m.state_size, f.Positive("mamba_d_state", 16));
  TANDEM_ASSIGN_OR_RETURN(m.conv_kernel, f.Positive("mamba_d_conv", 4));
  TANDEM_ASSIGN_OR_RETURN(expand, f.Positive("mamba_expand", 2));
  m.inner = expand * c.hidden_size;
  if (f.Has("mamba_dt_rank") && f.json()["mamba_dt_rank"].is_string()) {
    std::string rank;
    TANDEM_ASSIGN_OR_RETURN(rank, f.String("mamba_dt_rank", "auto"));
    if (rank != "auto") return f.Error("mamba_dt_rank", "must be an integer or \"auto\"");
    m.dt_rank = (c.hidden_size + 15) / 16;
  } else {
    TANDEM_ASSIGN_OR_RETURN(m.dt_rank, f.Positive("mamba_dt_rank", (c.hidden_size + 15) / 16));
  }
  TANDEM_ASSIGN_OR_RETURN(m.conv_bias, f.Bool("mamba_conv_bias", true));
  TANDEM_ASSIGN_OR_RETURN(m.proj_bias, f.Bool("mamba_proj_bias", false));

  int32_t attn_period, attn_offset, expert_period, expert_offset;
  TANDEM_ASSIGN_OR_RETURN(attn_period, f.Positive("attn_layer_period", 8));
  TANDEM_ASSIGN_OR_RETURN(expert_period, f.Positive("expert_layer_period", 2));
  int64_t v;
  TANDEM_ASSIGN_OR_RETURN(v, f.Int("attn_layer_offset", 4));
  attn_offset = static_cast<int32_t>(v);
  TANDEM_ASSIGN_OR_RETURN(v, f.Int("expert_layer_offset", 1));
  expert_offset = static_cast<int32_t>(v);
  if (attn_offset < 0 || attn_offset >= attn_period) {
    return f.Error(
        "attn_layer_offset",
        absl::StrCat("= ", attn_offset, " must be in [0, attn_layer_period = ", attn_period, ")"));
  }
  if (expert_offset < 0 || expert_offset >= expert_period) {
    return f.Error("expert_layer_offset",
                   absl::StrCat("= ", expert_offset,
                                " must be in [0, expert_layer_period = ", expert_period, ")"));
  }
  const char* experts_key = f.Has("num_experts") ? "num_experts" : "num_local_experts";
  TANDEM_ASSIGN_OR_RETURN(c.num_experts, f.Positive(experts_key, 16));
  TANDEM_ASSIGN_OR_RETURN(c.experts_per_token, f.Positive("num_experts_per_tok", 2));
  if (c.num_experts > 1 && c.experts_per_token > c.num_experts) {
    return f.Error("num_experts_per_tok", absl::StrCat("= ", c.experts_per_token, " exceeds ",
                                                       experts_key, " = ", c.num_experts));
  }
  c.expert_intermediate_size = c.intermediate_size;

  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerSpec layer;
    if (i % attn_period == attn_offset) {
      layer.mixer = MixerKind::kAttention;
      layer.attention_index = c.num_attention_layers++;
    } else {
      layer.mixer = MixerKind::kMamba1;
      layer.ssm_index = c.num_ssm_layers++;
    }
    // A layer scheduled for experts with num_experts == 1 is a plain MLP in transformers.
    layer.ffn =
        (i % expert_period == expert_offset && c.num_experts > 1) ? FfnKind::kMoe : FfnKind::kDense;
    c.layers.push_back(layer);
  }
  return absl::OkStatus();
}

absl::Status ParseZamba2(const Fields& f, const ConfigOptions& options, ModelConfig& c) {
  c.family = Family::kZamba2;
  const int32_t h = c.hidden_size;
  TANDEM_RETURN_IF_ERROR(ReadNormEpsAndTying(f, "rms_norm_eps", 1e-5, true, c));
  TANDEM_ASSIGN_OR_RETURN(c.intermediate_size, f.Positive("intermediate_size", int64_t{4} * h));
  TANDEM_ASSIGN_OR_RETURN(c.ffn_activation, ParseActivation(f, "hidden_act", "gelu"));
  bool bias_linear;
  TANDEM_ASSIGN_OR_RETURN(bias_linear, f.Bool("add_bias_linear", false));
  if (bias_linear) {
    return absl::UnimplementedError(
        absl::StrCat(f.source(),
                     ": field 'add_bias_linear' = true is not supported (no released Zamba2 "
                     "checkpoint uses biases on its linear layers)"));
  }

  Mamba2Dims& m = c.mamba2;
  int32_t expand;
  TANDEM_ASSIGN_OR_RETURN(m.state_size, f.Positive("mamba_d_state", 64));
  TANDEM_ASSIGN_OR_RETURN(m.conv_kernel, f.Positive("mamba_d_conv", 4));
  TANDEM_ASSIGN_OR_RETURN(expand, f.Positive("mamba_expand", 2));
  m.inner = expand * h;
  TANDEM_ASSIGN_OR_RETURN(m.groups, f.Positive("mamba_ngroups", 1));
  TANDEM_ASSIGN_OR_RETURN(m.heads, f.Positive("n_mamba_heads", 8));
  if (absl::Status s =
          RequireDivides(f, "n_mamba_heads", m.heads, "mamba_expand·hidden_size", m.inner);
      !s.ok()) {
    return s;
  }
  TANDEM_ASSIGN_OR_RETURN(m.head_dim, f.Positive("mamba_headdim", m.inner / m.heads));
  if (m.head_dim * m.heads != m.inner) {
    return f.Error("mamba_headdim", absl::StrCat("= ", m.head_dim, " times n_mamba_heads = ",
                                                 m.heads, " must equal ", m.inner));
  }
  if (absl::Status s = RequireDivides(f, "mamba_ngroups", m.groups, "n_mamba_heads", m.heads);
      !s.ok()) {
    return s;
  }
  TANDEM_ASSIGN_OR_RETURN(m.chunk_size, f.Positive("chunk_size", 256));
  m.conv_bias = true;  // Zamba2's mixer always builds its conv with a bias
  m.proj_bias = false;
  m.norm_groups = m.groups;  // grouped gated norm, as mamba_ssm and Zyphra define it
  m.norm_eps = 1e-5f;        // hard-coded in transformers' Zamba2 gated norm
  double step_min;
  TANDEM_ASSIGN_OR_RETURN(step_min, f.Number("time_step_min", 0.001));
  m.dt_min =
      options.zamba2_dt_clamp == Zamba2DtClamp::kTimeStepMin ? static_cast<float>(step_min) : 0.0f;
  m.dt_max = 0.0f;

  AttentionDims& a = c.attention;
  TANDEM_RETURN_IF_ERROR(ReadAttentionHeads(f, std::nullopt, a));
  TANDEM_ASSIGN_OR_RETURN(a.input_width, f.Positive("attention_hidden_size", int64_t{2} * h));
  if (a.input_width != 2 * h) {
    return f.Error("attention_hidden_size",
                   absl::StrCat("= ", a.input_width, " must be 2·hidden_size = ", 2 * h,
                                " (the shared block reads concat(hidden, embedding))"));
  }
  const char* head_dim_key = f.Has("attention_head_dim") ? "attention_head_dim" : "head_dim";
  TANDEM_ASSIGN_OR_RETURN(a.head_dim, f.Positive(head_dim_key, a.input_width / a.heads));
  if (a.head_dim * a.heads != a.input_width) {
    return f.Error(head_dim_key, absl::StrCat("= ", a.head_dim, " times num_attention_heads = ",
                                              a.heads, " must equal ", a.input_width));
  }
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim) / 2.0f);  // (dh/2)^-1/2
  TANDEM_ASSIGN_OR_RETURN(a.rope, f.Bool("use_mem_rope", false));
  double theta;
  TANDEM_ASSIGN_OR_RETURN(theta, RopeTheta(f));
  bool long_context;
  TANDEM_ASSIGN_OR_RETURN(long_context, f.Bool("use_long_context", false));
  if (long_context && a.rope) {
    // transformers v4 (our reference) rescales the base for long context; v5 dropped this.
    const double dh = a.head_dim;
    theta *= std::pow(8.0, dh / (dh - 2.0));
  }
  a.rope_theta = static_cast<float>(theta);

  TANDEM_ASSIGN_OR_RETURN(c.num_mem_blocks, f.Positive("num_mem_blocks", 1));
  TANDEM_ASSIGN_OR_RETURN(c.attention_adapter, f.Bool("use_shared_attention_adapter", false));
  TANDEM_ASSIGN_OR_RETURN(c.adapter_rank, f.Positive("adapter_rank", 128));

  if (!f.Has("layers_block_type") || !f.json()["layers_block_type"].is_array()) {
    return f.Error("layers_block_type", "must be a list of \"mamba\" / \"hybrid\" entries");
  }
  const Json& types = f.json()["layers_block_type"];
  if (static_cast<int64_t>(types.size()) != c.num_layers) {
    return f.Error(
        "layers_block_type",
        absl::StrCat("has ", types.size(), " entries but num_hidden_layers = ", c.num_layers));
  }
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string t = types[i].is_string() ? types[i].get<std::string>() : "";
    LayerSpec layer;
    layer.mixer = MixerKind::kMamba2;
    layer.ssm_index = c.num_ssm_layers++;
    if (t == "hybrid" || t == "g") {
      layer.zamba2_hybrid = true;
      layer.hybrid_position = static_cast<int32_t>(c.hybrid_layer_ids.size());
      layer.shared_block = layer.hybrid_position % c.num_mem_blocks;
      layer.attention_index = c.num_attention_layers++;
      c.hybrid_layer_ids.push_back(i);
    } else if (t != "mamba" && t != "m" && t != "linear_attention") {
      return f.Error("layers_block_type", absl::StrCat("entry ", i, " is ", types[i].dump(),
                                                       "; expected \"mamba\" or \"hybrid\""));
    }
    c.layers.push_back(layer);
  }
  return absl::OkStatus();
}

// A number of time_step_limit: JSON's, or transformers 5's {"__float__": "Infinity"} (what it
// writes for a float JSON has no literal for).
std::optional<double> LimitNumber(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_object() && v.contains("__float__") && v["__float__"].is_string()) {
    const std::string& text = v["__float__"].get_ref<const std::string&>();
    if (text == "Infinity" || text == "inf") return std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

// time_step_limit [min, max], the clamp of dt after softplus, into m.dt_min / m.dt_max (absent:
// no clamp).
absl::Status ReadTimeStepLimit(const Fields& f, Mamba2Dims& m) {
  if (!f.Has("time_step_limit")) return absl::OkStatus();
  const Json& lim = f.json()["time_step_limit"];
  const bool pair = lim.is_array() && lim.size() == 2;
  const std::optional<double> lo = pair ? LimitNumber(lim[0]) : std::nullopt;
  const std::optional<double> hi = pair ? LimitNumber(lim[1]) : std::nullopt;
  if (!lo || !hi) {
    return f.Error("time_step_limit", absl::StrCat("must be [min, max], found ", lim.dump()));
  }
  if (*lo < 0 || *hi < *lo) {
    return f.Error("time_step_limit",
                   absl::StrCat("must satisfy 0 <= min <= max, found ", lim.dump()));
  }
  m.dt_min = static_cast<float>(*lo);
  // Infinity (read as DBL_MAX) or anything beyond float range means no upper clamp.
  m.dt_max = *hi >= std::numeric_limits<float>::max() ? 0.0f : static_cast<float>(*hi);
  return absl::OkStatus();
}

absl::Status ParseMamba2(const Fields& f, ModelConfig& c) {
  c.family = Family::kMamba2;
  TANDEM_RETURN_IF_ERROR(ReadNormEpsAndTying(f, "layer_norm_epsilon", 1e-5, false, c));

  Mamba2Dims& m = c.mamba2;
  int32_t expand;
  TANDEM_ASSIGN_OR_RETURN(m.heads, f.Positive("num_heads", 128));
  TANDEM_ASSIGN_OR_RETURN(m.head_dim, f.Positive("head_dim", 64));
  TANDEM_ASSIGN_OR_RETURN(m.state_size, f.Positive("state_size", 128));
  TANDEM_ASSIGN_OR_RETURN(expand, f.Positive("expand", 2));
  m.inner = expand * c.hidden_size;
  if (m.heads * m.head_dim != m.inner) {
    return f.Error("num_heads", absl::StrCat("= ", m.heads, " times head_dim = ", m.head_dim,
                                             " must equal expand·hidden_size = ", m.inner));
  }
  TANDEM_ASSIGN_OR_RETURN(m.conv_kernel, f.Positive("conv_kernel", 4));
  TANDEM_ASSIGN_OR_RETURN(m.groups, f.Positive("n_groups", 8));
  if (absl::Status s = RequireDivides(f, "n_groups", m.groups, "num_heads", m.heads); !s.ok()) {
    return s;
  }
  TANDEM_ASSIGN_OR_RETURN(m.chunk_size, f.Positive("chunk_size", 256));
  TANDEM_ASSIGN_OR_RETURN(m.conv_bias, f.Bool("use_conv_bias", true));
  TANDEM_ASSIGN_OR_RETURN(m.proj_bias, f.Bool("use_bias", false));
  m.norm_groups = 1;  // transformers' Mamba2 gated norm spans all channels
  m.norm_eps = c.rms_norm_eps;
  TANDEM_RETURN_IF_ERROR(ReadTimeStepLimit(f, m));
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerSpec layer;
    layer.mixer = MixerKind::kMamba2;
    layer.ssm_index = c.num_ssm_layers++;
    c.layers.push_back(layer);
  }
  return absl::OkStatus();
}


// The Mamba-2 dimensions under the mamba_* names that Bamba and its descendant Granite-4.0-H
// share (mamba_d_head may be "auto": inner / heads).
absl::Status ReadMambaPrefixedDims(const Fields& f, int32_t h, Mamba2Dims& m) {
  int32_t expand;
  TANDEM_ASSIGN_OR_RETURN(expand, f.Positive("mamba_expand", 2));
  m.inner = expand * h;
  TANDEM_ASSIGN_OR_RETURN(m.heads, f.Positive("mamba_n_heads", 128));
  TANDEM_RETURN_IF_ERROR(
      RequireDivides(f, "mamba_n_heads", m.heads, "mamba_expand·hidden_size", m.inner));
  if (f.Has("mamba_d_head") && f.json()["mamba_d_head"].is_string()) {
    std::string head;
    TANDEM_ASSIGN_OR_RETURN(head, f.String("mamba_d_head", "auto"));
    if (head != "auto") return f.Error("mamba_d_head", "must be an integer or \"auto\"");
    m.head_dim = m.inner / m.heads;
  } else {
    TANDEM_ASSIGN_OR_RETURN(m.head_dim, f.Positive("mamba_d_head", m.inner / m.heads));
  }
  if (m.head_dim * m.heads != m.inner) {
    return f.Error("mamba_d_head", absl::StrCat("= ", m.head_dim, " times mamba_n_heads = ",
                                                m.heads, " must equal ", m.inner));
  }
  TANDEM_ASSIGN_OR_RETURN(m.groups, f.Positive("mamba_n_groups", 1));
  TANDEM_RETURN_IF_ERROR(RequireDivides(f, "mamba_n_groups", m.groups, "mamba_n_heads", m.heads));
  TANDEM_ASSIGN_OR_RETURN(m.state_size, f.Positive("mamba_d_state", 256));
  TANDEM_ASSIGN_OR_RETURN(m.conv_kernel, f.Positive("mamba_d_conv", 4));
  TANDEM_ASSIGN_OR_RETURN(m.chunk_size, f.Positive("mamba_chunk_size", 256));
  TANDEM_ASSIGN_OR_RETURN(m.conv_bias, f.Bool("mamba_conv_bias", true));
  TANDEM_ASSIGN_OR_RETURN(m.proj_bias, f.Bool("mamba_proj_bias", false));
  return absl::OkStatus();
}

// hidden_act of Bamba and Granite-4.0-H, which transformers applies in the MLP and in the Mamba-2
// mixer's convolution alike; tandem's convolution runs silu alone, so the MLP's is silu too.
absl::Status ReadSiluMlpAndMixerActivation(const Fields& f, ModelConfig& c) {
  std::string act;
  TANDEM_ASSIGN_OR_RETURN(act, f.String("hidden_act", "silu"));
  c.ffn_activation = kernels::Activation::kSilu;
  if (act == "silu" || act == "swish") return absl::OkStatus();
  return f.Error("hidden_act", absl::StrCat("names '", act.substr(0, 32),
                                            "'; it is also the Mamba-2 convolution's activation, "
                                            "which runs silu only"));
}

// Plain RoPE's theta into `a`. Scaled RoPE is refused by name, as transformers 4 writes it
// (rope_scaling) and as transformers 5 does (rope_parameters' rope_type): tandem applies plain
// RoPE.
absl::Status ReadPlainRope(const Fields& f, AttentionDims& a) {
  if (f.Has("rope_scaling")) {
    return absl::UnimplementedError(absl::StrCat(f.source(), ": field 'rope_scaling' = ",
                                                 f.json()["rope_scaling"].dump(),
                                                 " is not supported (tandem applies plain RoPE)"));
  }
  if (f.Has("rope_parameters") && f.json()["rope_parameters"].is_object()) {
    Fields rope(f.json()["rope_parameters"], f.source());
    std::string type;
    TANDEM_ASSIGN_OR_RETURN(type, rope.String("rope_type", "default"));
    if (type != "default") {
      return absl::UnimplementedError(
          absl::StrCat(f.source(), ": field 'rope_parameters' has rope_type '", type.substr(0, 32),
                       "', which is not supported (tandem applies plain RoPE)"));
    }
  }
  double theta;
  TANDEM_ASSIGN_OR_RETURN(theta, RopeTheta(f));
  a.rope_theta = static_cast<float>(theta);
  return absl::OkStatus();
}

// IBM Granite-4.0-H (transformers' GraniteMoeHybrid): Mamba-2 layers (HF Mamba2's mixer,
// full-width gated norm) and attention layers without positional encoding by default, each
// followed by top-k experts plus an always-on shared MLP (or the shared MLP alone), with the
// muP-style multipliers of the embeddings, residual branches and logits.
absl::Status ParseGraniteHybrid(const Fields& f, ModelConfig& c) {
  c.family = Family::kGraniteHybrid;
  const int32_t h = c.hidden_size;
  TANDEM_RETURN_IF_ERROR(ReadNormEpsAndTying(f, "rms_norm_eps", 1e-6, false, c));
  TANDEM_RETURN_IF_ERROR(ReadSiluMlpAndMixerActivation(f, c));
  TANDEM_ASSIGN_OR_RETURN(c.embedding_multiplier, PositiveScalar(f, "embedding_multiplier"));
  TANDEM_ASSIGN_OR_RETURN(c.residual_multiplier, PositiveScalar(f, "residual_multiplier"));
  TANDEM_ASSIGN_OR_RETURN(c.logits_scaling, PositiveScalar(f, "logits_scaling"));
  TANDEM_RETURN_IF_ERROR(RefuseAttentionBias(f, "Granite-4.0-H"));

  AttentionDims& a = c.attention;
  TANDEM_RETURN_IF_ERROR(ReadAttentionHeads(f, std::nullopt, a));
  // transformers derives the head size from the hidden size; o_proj is [H, H].
  TANDEM_RETURN_IF_ERROR(RequireDivides(f, "num_attention_heads", a.heads, "hidden_size", h));
  a.head_dim = h / a.heads;
  a.input_width = h;
  // The softmax scale itself, not a factor of 1/sqrt(head_dim).
  TANDEM_ASSIGN_OR_RETURN(a.scale, PositiveScalar(f, "attention_multiplier"));
  std::string position;
  TANDEM_ASSIGN_OR_RETURN(position, f.String("position_embedding_type", ""));
  a.rope = position == "rope";  // transformers: anything else means no positional encoding
  if (a.rope) TANDEM_RETURN_IF_ERROR(ReadPlainRope(f, a));

  Mamba2Dims& m = c.mamba2;
  TANDEM_RETURN_IF_ERROR(ReadMambaPrefixedDims(f, h, m));
  m.norm_groups = 1;  // transformers' GraniteMoeHybrid gated norm spans all channels
  m.norm_eps = c.rms_norm_eps;
  m.dt_min = 0.0f;  // transformers fixes time_step_limit at (0, inf): no clamp
  m.dt_max = 0.0f;

  int64_t experts;
  TANDEM_ASSIGN_OR_RETURN(experts, f.Int("num_local_experts", 8));
  if (experts < 0 || experts > Fields::UpperLimit("num_local_experts")) {
    return f.Error("num_local_experts", absl::StrCat("must be in [0, ",
                                                     Fields::UpperLimit("num_local_experts"),
                                                     "], found ", experts));
  }
  c.num_experts = static_cast<int32_t>(experts);
  if (c.num_experts > 0) {
    TANDEM_ASSIGN_OR_RETURN(c.experts_per_token, f.Positive("num_experts_per_tok", 2));
    if (c.experts_per_token > c.num_experts) {
      return f.Error("num_experts_per_tok",
                     absl::StrCat("= ", c.experts_per_token,
                                  " exceeds num_local_experts = ", c.num_experts));
    }
    TANDEM_ASSIGN_OR_RETURN(c.intermediate_size, f.Positive("intermediate_size", 11008));
  }
  c.expert_intermediate_size = c.intermediate_size;
  c.expert_routing.renormalize = true;
  TANDEM_ASSIGN_OR_RETURN(c.shared_mlp_intermediate, f.Positive("shared_intermediate_size", 1024));

  std::vector<std::string> types(static_cast<size_t>(c.num_layers), "mamba");
  if (f.Has("layer_types")) {
    const Json& list = f.json()["layer_types"];
    if (!list.is_array() || static_cast<int64_t>(list.size()) != c.num_layers) {
      return f.Error("layer_types", absl::StrCat("must list num_hidden_layers = ", c.num_layers,
                                                 " entries of \"mamba\" / \"attention\""));
    }
    for (int32_t i = 0; i < c.num_layers; ++i) {
      types[i] = list[i].is_string() ? list[i].get<std::string>() : list[i].dump();
    }
  }
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerSpec layer;
    if (types[i] == "attention") {
      layer.mixer = MixerKind::kAttention;
      layer.attention_index = c.num_attention_layers++;
    } else if (types[i] == "mamba") {
      layer.mixer = MixerKind::kMamba2;
      layer.ssm_index = c.num_ssm_layers++;
    } else {
      return f.Error("layer_types", absl::StrCat("entry ", i, " is \"", types[i].substr(0, 32),
                                                 "\"; expected \"mamba\" or \"attention\""));
    }
    layer.ffn = c.num_experts > 0 ? FfnKind::kMoe : FfnKind::kDense;
    c.layers.push_back(layer);
  }
  return absl::OkStatus();
}

// The key a Nemotron-H config lists its layers under (the hub's pattern string, or transformers
// 5's list under either name), and how many it lists.
const char* NemotronHLayerKey(const Fields& f) {
  if (f.Has("hybrid_override_pattern")) return "hybrid_override_pattern";
  return f.Has("layers_block_type") ? "layers_block_type" : "layer_types";
}
std::optional<int64_t> NemotronHListedLayers(const Fields& f) {
  const char* key = NemotronHLayerKey(f);
  if (!f.Has(key)) return std::nullopt;
  const Json& v = f.json()[key];
  if (v.is_string()) return static_cast<int64_t>(v.get_ref<const std::string&>().size());
  if (v.is_array()) return static_cast<int64_t>(v.size());
  return std::nullopt;
}

// IBM's Bamba (transformers' Bamba, Granite-4.0-H's parent): Mamba-2 layers (grouped gated
// norm) and, at attn_layer_indices, attention layers with RoPE over the first half of each head,
// every layer followed by a gated MLP.
absl::Status ParseBamba(const Fields& f, ModelConfig& c) {
  c.family = Family::kBamba;
  const int32_t h = c.hidden_size;
  TANDEM_RETURN_IF_ERROR(ReadNormEpsAndTying(f, "rms_norm_eps", 1e-5, false, c));
  TANDEM_RETURN_IF_ERROR(ReadSiluMlpAndMixerActivation(f, c));
  TANDEM_ASSIGN_OR_RETURN(c.intermediate_size, f.Positive("intermediate_size", 14336));
  bool mlp_bias;
  TANDEM_ASSIGN_OR_RETURN(mlp_bias, f.Bool("mlp_bias", false));
  if (mlp_bias) {
    return absl::UnimplementedError(absl::StrCat(
        f.source(), ": field 'mlp_bias' = true is not supported (no released Bamba checkpoint "
                    "has MLP biases)"));
  }
  TANDEM_RETURN_IF_ERROR(RefuseAttentionBias(f, "Bamba"));

  AttentionDims& a = c.attention;
  TANDEM_RETURN_IF_ERROR(ReadAttentionHeads(f, 8, a));
  TANDEM_ASSIGN_OR_RETURN(a.head_dim, f.Positive("head_dim", h / a.heads > 0 ? h / a.heads : 1));
  a.input_width = h;
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  a.rope = true;
  TANDEM_RETURN_IF_ERROR(ReadPlainRope(f, a));
  // The rotated share of each head: rope_parameters' partial_rotary_factor when a (transformers
  // 5) config has one, else 0.5, which transformers sets for Bamba (a top-level
  // partial_rotary_factor, or none, gives 0.5).
  double factor = 0.5;
  if (f.Has("rope_parameters") && f.json()["rope_parameters"].is_object()) {
    Fields rope(f.json()["rope_parameters"], f.source());
    TANDEM_ASSIGN_OR_RETURN(factor, rope.Number("partial_rotary_factor", 0.5));
  }
  if (!(factor > 0.0 && factor <= 1.0)) {
    return f.Error("rope_parameters", absl::StrCat("has partial_rotary_factor ", factor,
                                                   "; expected a share of the head in (0, 1]"));
  }
  a.rope_dims = static_cast<int32_t>(a.head_dim * factor);
  if (a.rope_dims < 2 || a.rope_dims % 2 != 0) {
    return f.Error("head_dim", absl::StrCat("= ", a.head_dim, " with partial_rotary_factor ",
                                            factor, " leaves ", a.rope_dims,
                                            " dimensions to rotate; RoPE needs an even number"));
  }

  Mamba2Dims& m = c.mamba2;
  TANDEM_RETURN_IF_ERROR(ReadMambaPrefixedDims(f, h, m));
  m.norm_groups = m.groups;  // grouped gated norm (group size inner / mamba_n_groups)
  m.norm_eps = c.rms_norm_eps;
  // A limit (none by default) clamps dt in prefill and decode alike, as the chunked scan it was
  // trained with applies it; transformers 5.24's one-token step alone skips it.
  TANDEM_RETURN_IF_ERROR(ReadTimeStepLimit(f, m));

  std::vector<bool> attention(static_cast<size_t>(c.num_layers), false);
  if (f.Has("attn_layer_indices")) {
    const Json& list = f.json()["attn_layer_indices"];
    if (!list.is_array()) {
      return f.Error("attn_layer_indices", absl::StrCat("must be a list of layer indices, found ",
                                                        list.dump().substr(0, 64)));
    }
    for (const Json& e : list) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= c.num_layers) {
        return f.Error("attn_layer_indices",
                       absl::StrCat("holds ", e.dump().substr(0, 32),
                                    "; expected layer indices in [0, num_hidden_layers = ",
                                    c.num_layers, ")"));
      }
      attention[static_cast<size_t>(e.get<int64_t>())] = true;
    }
  }
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerSpec layer;
    if (attention[static_cast<size_t>(i)]) {
      layer.mixer = MixerKind::kAttention;
      layer.attention_index = c.num_attention_layers++;
    } else {
      layer.mixer = MixerKind::kMamba2;
      layer.ssm_index = c.num_ssm_layers++;
    }
    layer.ffn = FfnKind::kDense;
    c.layers.push_back(layer);
  }
  return absl::OkStatus();
}

// One Nemotron-H block's kind: a mixer, or a feed-forward part alone (MLP or experts).
struct NemotronHBlock {
  MixerKind mixer = MixerKind::kNone;
  FfnKind ffn = FfnKind::kNone;
};

// The layer list: the hub's pattern string, or transformers v5's list (under either name).
absl::StatusOr<std::vector<NemotronHBlock>> ParseNemotronHBlocks(const Fields& f) {
  std::vector<NemotronHBlock> blocks;
  if (f.Has("hybrid_override_pattern")) {
    std::string pattern;
    TANDEM_ASSIGN_OR_RETURN(pattern, f.String("hybrid_override_pattern", ""));
    for (size_t i = 0; i < pattern.size(); ++i) {
      const char k = pattern[i];
      if (k == 'M') {
        blocks.push_back({MixerKind::kMamba2, FfnKind::kNone});
      } else if (k == '*') {
        blocks.push_back({MixerKind::kAttention, FfnKind::kNone});
      } else if (k == '-') {
        blocks.push_back({MixerKind::kNone, FfnKind::kDense});
      } else if (k == 'E') {
        blocks.push_back({MixerKind::kNone, FfnKind::kMoe});
      } else {
        return f.Error("hybrid_override_pattern",
                       absl::StrCat("has '", std::string(1, k), "' at ", i,
                                    "; expected M (Mamba-2), * (attention), - (MLP) or E "
                                    "(experts)"));
      }
    }
    return blocks;
  }
  const char* key = NemotronHLayerKey(f);
  if (!f.Has(key) || !f.json()[key].is_array()) {
    return f.Error("hybrid_override_pattern",
                   "is missing (and no layers_block_type list is given instead)");
  }
  for (const Json& e : f.json()[key]) {
    const std::string t = e.is_string() ? e.get<std::string>() : e.dump();
    if (t == "mamba" || t == "linear_attention") {
      blocks.push_back({MixerKind::kMamba2, FfnKind::kNone});
    } else if (t == "attention" || t == "full_attention") {
      blocks.push_back({MixerKind::kAttention, FfnKind::kNone});
    } else if (t == "mlp") {
      blocks.push_back({MixerKind::kNone, FfnKind::kDense});
    } else if (t == "moe") {
      blocks.push_back({MixerKind::kNone, FfnKind::kMoe});
    } else {
      return f.Error(key, absl::StrCat("has \"", t.substr(0, 32), "\"; expected mamba, "
                                       "attention, mlp or moe (or their v5 names)"));
    }
  }
  return blocks;
}

// Nemotron 3's expert layers: n_routed_experts plain (up → act → down) experts, picked by a
// sigmoid router with a correction bias (in groups, weights renormalised and scaled), beside one
// plain shared expert; the routed experts may run on a latent projection of the hidden state.
absl::Status ParseNemotronHExperts(const Fields& f, ModelConfig& c) {
  const char* experts_key =
      f.Has("num_local_experts") && !f.Has("n_routed_experts") ? "num_local_experts"
                                                                : "n_routed_experts";
  TANDEM_ASSIGN_OR_RETURN(c.num_experts, f.Positive(experts_key));
  TANDEM_ASSIGN_OR_RETURN(c.experts_per_token, f.Positive("num_experts_per_tok"));
  TANDEM_ASSIGN_OR_RETURN(c.expert_intermediate_size, f.Positive("moe_intermediate_size"));
  TANDEM_ASSIGN_OR_RETURN(c.shared_mlp_intermediate,
                          f.Positive("moe_shared_expert_intermediate_size"));
  int64_t shared_experts;
  TANDEM_ASSIGN_OR_RETURN(shared_experts, f.Int("n_shared_experts", 1));
  if (shared_experts != 1) {
    // transformers' NemotronH builds exactly one shared expert whatever this says.
    return f.Error("n_shared_experts", absl::StrCat("= ", shared_experts,
                                                    "; Nemotron-H layers have one shared expert"));
  }
  if (f.Has("moe_latent_size")) {
    TANDEM_ASSIGN_OR_RETURN(c.expert_latent_size, f.Positive("moe_latent_size"));
  }
  kernels::MoeRouting& r = c.expert_routing;
  r.score = kernels::MoeRouting::Score::kSigmoid;
  TANDEM_ASSIGN_OR_RETURN(r.renormalize, f.Bool("norm_topk_prob", true));
  TANDEM_ASSIGN_OR_RETURN(r.groups, f.Positive("n_group", 1));
  TANDEM_ASSIGN_OR_RETURN(r.top_groups, f.Positive("topk_group", 1));
  double scale;
  TANDEM_ASSIGN_OR_RETURN(scale, f.Number("routed_scaling_factor", 1.0));
  if (!(scale > 0.0) || !std::isfinite(static_cast<float>(scale))) {
    return f.Error("routed_scaling_factor", absl::StrCat("must be a positive finite float, found ",
                                                         f.json()["routed_scaling_factor"].dump()));
  }
  r.scale = static_cast<float>(scale);
  if (!kernels::RoutingFits(r, c.num_experts, c.experts_per_token)) {
    return f.Error("n_group",
                   absl::StrCat("= ", r.groups, " with topk_group = ", r.top_groups,
                                " cannot route ", c.experts_per_token, " of ", c.num_experts,
                                " experts: n_group must divide them into groups of two or more "
                                "(at most ", kernels::kMaxMoeGroups,
                                " groups), topk_group be in [1, n_group], and the chosen groups "
                                "hold num_experts_per_tok"));
  }
  return absl::OkStatus();
}

// NVIDIA Nemotron-H (transformers' NemotronH): a stack of single-purpose blocks, each
// norm → one of {Mamba-2 mixer, attention without positional encoding, ungated relu² MLP,
// Nemotron 3's experts} → residual add, listed by hybrid_override_pattern ("M", "*", "-", "E")
// or layers_block_type.
absl::Status ParseNemotronH(const Fields& f, ModelConfig& c) {
  c.family = Family::kNemotronH;
  const int32_t h = c.hidden_size;
  TANDEM_RETURN_IF_ERROR(ReadNormEpsAndTying(f, "layer_norm_epsilon", 1e-5, false, c));

  std::vector<NemotronHBlock> blocks;
  TANDEM_ASSIGN_OR_RETURN(blocks, ParseNemotronHBlocks(f));
  if (static_cast<int64_t>(blocks.size()) != c.num_layers) {
    return f.Error("num_hidden_layers", absl::StrCat("= ", c.num_layers, " but the layer list has ",
                                                     blocks.size(), " entries"));
  }

  AttentionDims& a = c.attention;
  TANDEM_RETURN_IF_ERROR(ReadAttentionHeads(f, 8, a));
  const char* head_dim_key = f.Has("head_dim") ? "head_dim" : "attention_head_dim";
  TANDEM_ASSIGN_OR_RETURN(a.head_dim, f.Positive(head_dim_key, h / a.heads > 0 ? h / a.heads : 1));
  a.input_width = h;
  a.rope = false;  // position comes from the Mamba layers
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  TANDEM_RETURN_IF_ERROR(RefuseAttentionBias(f, "Nemotron-H"));

  Mamba2Dims& m = c.mamba2;
  TANDEM_ASSIGN_OR_RETURN(m.heads, f.Positive("mamba_num_heads", 128));
  TANDEM_ASSIGN_OR_RETURN(m.head_dim, f.Positive("mamba_head_dim", 64));
  m.inner = m.heads * m.head_dim;
  TANDEM_ASSIGN_OR_RETURN(m.groups, f.Positive("n_groups", 8));
  TANDEM_RETURN_IF_ERROR(RequireDivides(f, "n_groups", m.groups, "mamba_num_heads", m.heads));
  TANDEM_ASSIGN_OR_RETURN(m.state_size, f.Positive("ssm_state_size", 128));
  TANDEM_ASSIGN_OR_RETURN(m.conv_kernel, f.Positive("conv_kernel", 4));
  TANDEM_ASSIGN_OR_RETURN(m.chunk_size, f.Positive("chunk_size", 128));
  TANDEM_ASSIGN_OR_RETURN(m.conv_bias, f.Bool("use_conv_bias", true));
  TANDEM_ASSIGN_OR_RETURN(m.proj_bias, f.Bool("use_bias", false));
  std::string mamba_act;
  TANDEM_ASSIGN_OR_RETURN(mamba_act, f.String("mamba_hidden_act", "silu"));
  if (mamba_act != "silu" && mamba_act != "swish") {
    return f.Error("mamba_hidden_act",
                   absl::StrCat("names '", mamba_act, "'; the Mamba-2 mixer runs silu only"));
  }
  m.norm_groups = m.groups;  // grouped gated norm (group size inner / n_groups)
  m.norm_eps = c.rms_norm_eps;
  // No dt clamp, as the model was trained (mamba_ssm's default dt_limit) and as transformers'
  // own recurrent step runs; transformers 5's chunked prefill alone clamps at time_step_min.
  m.dt_min = 0.0f;
  m.dt_max = 0.0f;

  std::string mlp_act;
  TANDEM_ASSIGN_OR_RETURN(mlp_act, f.String("mlp_hidden_act", "relu2"));
  if (mlp_act == "relu2") {
    c.ffn_activation = kernels::Activation::kReluSquared;
  } else if (mlp_act == "silu" || mlp_act == "gelu") {
    c.ffn_activation = mlp_act == "silu" ? kernels::Activation::kSilu : kernels::Activation::kGelu;
  } else {
    return f.Error("mlp_hidden_act", absl::StrCat("names an unsupported activation '", mlp_act,
                                                  "' (supported: relu2, silu, gelu)"));
  }
  c.ffn_gated = false;
  TANDEM_ASSIGN_OR_RETURN(c.ffn_bias, f.Bool("mlp_bias", false));
  auto any = [&](FfnKind ffn) {
    return std::any_of(blocks.begin(), blocks.end(),
                       [&](const NemotronHBlock& b) { return b.ffn == ffn; });
  };
  if (any(FfnKind::kDense)) {
    TANDEM_ASSIGN_OR_RETURN(c.intermediate_size, f.Positive("intermediate_size"));
  }
  if (any(FfnKind::kMoe)) TANDEM_RETURN_IF_ERROR(ParseNemotronHExperts(f, c));

  for (const NemotronHBlock& block : blocks) {
    LayerSpec layer;
    layer.mixer = block.mixer;
    layer.ffn = block.ffn;
    if (block.mixer == MixerKind::kAttention) layer.attention_index = c.num_attention_layers++;
    if (block.mixer == MixerKind::kMamba2) layer.ssm_index = c.num_ssm_layers++;
    c.layers.push_back(layer);
  }
  return absl::OkStatus();
}
}  // namespace

std::string FamilyName(Family family) {
  switch (family) {
    case Family::kJamba:
      return "jamba";
    case Family::kZamba2:
      return "zamba2";
    case Family::kMamba2:
      return "mamba2";
    case Family::kGraniteHybrid:
      return "granitemoehybrid";
    case Family::kNemotronH:
      return "nemotron_h";
    case Family::kBamba:
      return "bamba";
  }
  return "unknown";
}

absl::StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& json, const std::string& source,
                                             const ConfigOptions& options) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));
  }
  const Json* input = &json;
  Fields f(json, source);

  std::string arch;
  if (f.Has("architectures") && (*input)["architectures"].is_array() &&
      !(*input)["architectures"].empty() && (*input)["architectures"][0].is_string()) {
    arch = (*input)["architectures"][0].get<std::string>();
  }
  std::string model_type;
  TANDEM_ASSIGN_OR_RETURN(model_type, f.String("model_type", ""));

  ModelConfig c;
  c.architecture = arch.empty() ? model_type : arch;
  // Nemotron-H lists its layers; transformers 5 writes no num_hidden_layers beside the list.
  std::optional<int64_t> listed_layers;
  if (arch == "NemotronHForCausalLM" || (arch.empty() && model_type == "nemotron_h")) {
    listed_layers = NemotronHListedLayers(f);
  }
  if (absl::Status s = ParseCommon(f, c, listed_layers); !s.ok()) return s;

  absl::Status s;
  if (arch == "JambaForCausalLM" || (arch.empty() && model_type == "jamba")) {
    s = ParseJamba(f, c);
  } else if (arch == "Zamba2ForCausalLM" || (arch.empty() && model_type == "zamba2")) {
    s = ParseZamba2(f, options, c);
  } else if (arch == "Mamba2ForCausalLM" || (arch.empty() && model_type == "mamba2")) {
    s = ParseMamba2(f, c);
  } else if (arch == "GraniteMoeHybridForCausalLM" ||
             (arch.empty() && model_type == "granitemoehybrid")) {
    s = ParseGraniteHybrid(f, c);
  } else if (arch == "NemotronHForCausalLM" || (arch.empty() && model_type == "nemotron_h")) {
    s = ParseNemotronH(f, c);
  } else if (arch == "BambaForCausalLM" || (arch.empty() && model_type == "bamba")) {
    s = ParseBamba(f, c);
  } else {
    return absl::UnimplementedError(absl::StrCat(
        source, ": architecture '", c.architecture.empty() ? "(none given)" : c.architecture,
        "' is not supported; tandem runs JambaForCausalLM, Zamba2ForCausalLM, "
        "Mamba2ForCausalLM, GraniteMoeHybridForCausalLM, NemotronHForCausalLM and "
        "BambaForCausalLM"));
  }
  if (!s.ok()) return s;
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir, const ConfigOptions& options) {
  const std::string path = dir + "/config.json";
  absl::StatusOr<Json> json = ReadJsonFile(path);
  if (!json.ok()) return json.status();
  absl::StatusOr<ModelConfig> config = ParseModelConfig(*json, path, options);
  if (!config.ok()) return config.status();

  const std::string gen_path = dir + "/generation_config.json";
  if (std::ifstream(gen_path).good()) {
    absl::StatusOr<Json> gen = ReadJsonFile(gen_path);
    if (!gen.ok()) return gen.status();
    Fields f(*gen, gen_path);
    std::vector<int32_t> eos;
    TANDEM_ASSIGN_OR_RETURN(eos, f.IdList("eos_token_id"));
    if (!eos.empty()) config->eos_token_ids = eos;
  }
  for (int32_t id : config->eos_token_ids) {
    if (id >= config->vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": eos token id ", id, " is outside the vocabulary of ", config->vocab_size));
    }
  }
  return config;
}

}  // namespace tandem::models
