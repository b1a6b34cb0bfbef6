// config.json → ModelConfig: layer schedules, derived dimensions, and Python-style JSON.
#include "models/model_config.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model_test_util.h"
#include "models/json_file.h"

namespace tandem::models {
namespace {

// A config field set to a value the parser must refuse, and what its message must name.
struct Refusal {
  const char* field;
  nlohmann::json value;
  const char* named = nullptr;  // null: the field itself
};

// Each refusal applied to `base` alone is refused, with a message naming what it should.
void ExpectRefused(const nlohmann::json& base, const std::vector<Refusal>& refusals) {
  for (const Refusal& r : refusals) {
    nlohmann::json j = base;
    j[r.field] = r.value;
    auto bad = ParseModelConfig(j, "config.json");
    ASSERT_FALSE(bad.ok()) << r.field << " = " << r.value.dump();
    const char* named = r.named != nullptr ? r.named : r.field;
    EXPECT_NE(bad.status().message().find(named), std::string::npos) << bad.status();
  }
}

TEST(ModelConfigTest, JambaScheduleFollowsPeriodsAndOffsets) {
  auto c = LoadModelConfig(testing::ModelDir("jamba-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->num_layers, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(c->layers[i].mixer == MixerKind::kAttention, i % 4 == 2) << i;
    EXPECT_EQ(c->layers[i].ffn == FfnKind::kMoe, i % 2 == 1) << i;
  }
  EXPECT_EQ(c->num_attention_layers, 2);
  EXPECT_EQ(c->num_ssm_layers, 6);
  EXPECT_EQ(c->attention.head_dim, 16);
  EXPECT_FALSE(c->attention.rope);
  EXPECT_FLOAT_EQ(c->attention.scale, 0.25f);
}

TEST(ModelConfigTest, Zamba2HybridPositionsCycleThroughSharedBlocks) {
  auto c = LoadModelConfig(testing::ModelDir("zamba2-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hybrid_layer_ids, (std::vector<int32_t>{1, 3, 5}));
  EXPECT_EQ(c->layers[5].hybrid_position, 2);
  EXPECT_EQ(c->layers[5].shared_block, 0);
  EXPECT_EQ(c->layers[3].shared_block, 1);
  EXPECT_EQ(c->num_ssm_layers, 6);  // every Zamba2 layer has a Mamba-2 mixer
  EXPECT_EQ(c->mamba2.norm_groups, 2);
  EXPECT_FLOAT_EQ(c->mamba2.dt_min, 0.0f);  // no clamp unless asked for
  ConfigOptions clamp;
  clamp.zamba2_dt_clamp = Zamba2DtClamp::kTimeStepMin;
  EXPECT_FLOAT_EQ(LoadModelConfig(testing::ModelDir("zamba2-tiny"), clamp)->mamba2.dt_min, 0.001f);
}

TEST(ModelConfigTest, Mamba2AcceptsPythonInfinityAndUsesFullWidthNorm) {
  auto c = LoadModelConfig(testing::ModelDir("mamba2-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mamba2.norm_groups, 1);
  EXPECT_EQ(c->mamba2.dt_max, 0.0f);  // [0, Infinity]: no upper clamp
  EXPECT_EQ(c->num_attention_layers, 0);
}

TEST(ModelConfigTest, GraniteLayerTypesExpertsAndMultipliers) {
  auto c = LoadModelConfig(testing::ModelDir("granite-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kGraniteHybrid);
  ASSERT_EQ(c->num_layers, 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(c->layers[i].mixer == MixerKind::kAttention, i == 1 || i == 4) << i;
    EXPECT_EQ(c->layers[i].ffn, FfnKind::kMoe) << i;
  }
  EXPECT_EQ(c->layers[4].attention_index, 1);
  EXPECT_EQ(c->layers[5].ssm_index, 3);
  EXPECT_EQ(c->num_experts, 4);
  EXPECT_EQ(c->intermediate_size, 32);
  EXPECT_EQ(c->shared_mlp_intermediate, 48);
  EXPECT_TRUE(c->expert_routing.renormalize);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 3.0f);
  EXPECT_FLOAT_EQ(c->residual_multiplier, 0.6f);
  EXPECT_FLOAT_EQ(c->logits_scaling, 2.5f);
  EXPECT_FLOAT_EQ(c->attention.scale, 0.125f);  // attention_multiplier, not 1/sqrt(16)
  EXPECT_EQ(c->attention.head_dim, 16);
  EXPECT_FALSE(c->attention.rope);
  EXPECT_EQ(c->mamba2.groups, 2);
  EXPECT_EQ(c->mamba2.norm_groups, 1);  // full-width gated norm, as transformers
  EXPECT_TRUE(c->tie_word_embeddings);

  auto dense = LoadModelConfig(testing::ModelDir("granite-tiny-dense"));
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->num_experts, 0);
  EXPECT_EQ(dense->layers[0].ffn, FfnKind::kDense);
  EXPECT_TRUE(dense->attention.rope);
  EXPECT_TRUE(dense->mamba2.proj_bias);
}

TEST(ModelConfigTest, GraniteRefusesWhatItCannotRunByName) {
  const nlohmann::json base = {{"architectures", {"GraniteMoeHybridForCausalLM"}},
                               {"vocab_size", 100},
                               {"hidden_size", 32},
                               {"num_hidden_layers", 2},
                               {"layer_types", {"mamba", "attention"}},
                               {"num_attention_heads", 4},
                               {"num_key_value_heads", 2},
                               {"num_local_experts", 0},
                               {"shared_intermediate_size", 64},
                               {"mamba_n_heads", 4},
                               {"mamba_d_state", 8}};
  auto ok = ParseModelConfig(base, "config.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->mamba2.head_dim, 16);  // "auto": expand · H / heads
  EXPECT_EQ(ok->layers[1].attention_index, 0);

  const std::vector<Refusal> refusals = {
      {"layer_types", {"mamba", "linear"}},
      {"layer_types", {"mamba"}},
      {"attention_bias", true},
      {"hidden_act", "gelu"},  // also the Mamba-2 convolution's activation
      {"logits_scaling", 0},
      {"residual_multiplier", -1.0},
      {"num_local_experts", -2},
      {"mamba_d_head", 5},
      {"mamba_d_head", "half"},
      {"num_attention_heads", 5},
  };
  ExpectRefused(base, refusals);
  nlohmann::json experts = base;
  experts["num_local_experts"] = 2;
  experts["num_experts_per_tok"] = 3;
  auto too_many = ParseModelConfig(experts, "config.json");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("num_experts_per_tok"), std::string::npos);
  nlohmann::json scaled = base;
  scaled["position_embedding_type"] = "rope";
  scaled["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  auto yarn = ParseModelConfig(scaled, "config.json");
  ASSERT_FALSE(yarn.ok());
  EXPECT_NE(yarn.status().message().find("rope_scaling"), std::string::npos);
}

TEST(ModelConfigTest, NemotronHLayersFromTheListOrThePattern) {
  auto c = LoadModelConfig(testing::ModelDir("nemotron-h-tiny"));  // transformers 5's list
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kNemotronH);
  const MixerKind want[] = {MixerKind::kMamba2, MixerKind::kAttention, MixerKind::kNone,
                            MixerKind::kMamba2, MixerKind::kNone,      MixerKind::kAttention,
                            MixerKind::kMamba2, MixerKind::kNone};
  ASSERT_EQ(c->num_layers, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(c->layers[i].mixer, want[i]) << i;
    EXPECT_EQ(c->layers[i].ffn == FfnKind::kDense, want[i] == MixerKind::kNone) << i;
  }
  EXPECT_EQ(c->num_ssm_layers, 3);
  EXPECT_EQ(c->num_attention_layers, 2);
  EXPECT_EQ(c->mamba2.inner, 128);  // heads × head dim, not expand × hidden
  EXPECT_EQ(c->mamba2.norm_groups, 2);
  EXPECT_FLOAT_EQ(c->mamba2.dt_min, 0.0f);
  EXPECT_EQ(c->ffn_activation, kernels::Activation::kReluSquared);
  EXPECT_FALSE(c->ffn_gated);
  EXPECT_TRUE(c->ffn_bias);
  EXPECT_FLOAT_EQ(c->attention.scale, 0.25f);
  EXPECT_FALSE(c->attention.rope);

  // The hub's form: a pattern string and num_hidden_layers.
  nlohmann::json hub = {{"architectures", {"NemotronHForCausalLM"}},
                        {"vocab_size", 100},
                        {"hidden_size", 32},
                        {"num_hidden_layers", 4},
                        {"hybrid_override_pattern", "M-*M"},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},
                        {"head_dim", 8},
                        {"mamba_num_heads", 4},
                        {"mamba_head_dim", 16},
                        {"n_groups", 2},
                        {"ssm_state_size", 8},
                        {"intermediate_size", 64}};
  auto parsed = ParseModelConfig(hub, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->layers[1].mixer, MixerKind::kNone);
  // Without num_hidden_layers the list says how many (pattern characters, or list entries).
  for (const char* key : {"hybrid_override_pattern", "layer_types"}) {
    nlohmann::json listed = hub;
    listed.erase("num_hidden_layers");
    if (std::string(key) == "layer_types") {
      listed.erase("hybrid_override_pattern");
      listed["layer_types"] = {"mamba", "mlp", "attention", "mamba"};
    }
    auto counted = ParseModelConfig(listed, "config.json");
    ASSERT_TRUE(counted.ok()) << key << ": " << counted.status();
    EXPECT_EQ(counted->num_layers, 4) << key;
  }
  EXPECT_EQ(parsed->layers[2].attention_index, 0);
  EXPECT_EQ(parsed->layers[3].ssm_index, 1);

  const std::vector<Refusal> refusals = {
      {"hybrid_override_pattern", "M-E*", "n_routed_experts"},  // experts, but none described
      {"hybrid_override_pattern", "M-x*", "hybrid_override_pattern"},
      {"num_hidden_layers", 5, "num_hidden_layers"},
      {"mamba_hidden_act", "gelu", "mamba_hidden_act"},
      {"mlp_hidden_act", "tanh", "mlp_hidden_act"},
      {"n_groups", 3, "n_groups"},
      {"attention_bias", true, "attention_bias"},
  };
  ExpectRefused(hub, refusals);
}

TEST(ModelConfigTest, NemotronHExpertLayers) {
  auto c = LoadModelConfig(testing::ModelDir("nemotron3-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  // linear_attention, moe, full_attention, linear_attention, mlp, moe, linear_attention, moe
  const FfnKind want[] = {FfnKind::kNone,  FfnKind::kMoe, FfnKind::kNone, FfnKind::kNone,
                          FfnKind::kDense, FfnKind::kMoe, FfnKind::kNone, FfnKind::kMoe};
  ASSERT_EQ(c->num_layers, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(c->layers[i].ffn, want[i]) << i;
    if (want[i] != FfnKind::kNone) {
      EXPECT_EQ(c->layers[i].mixer, MixerKind::kNone) << i;
    }
  }
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->experts_per_token, 3);
  EXPECT_EQ(c->expert_intermediate_size, 48);
  EXPECT_EQ(c->intermediate_size, 96);  // the MLP layer's
  EXPECT_EQ(c->shared_mlp_intermediate, 80);
  EXPECT_EQ(c->expert_latent_size, 32);
  EXPECT_EQ(c->expert_routing.score, kernels::MoeRouting::Score::kSigmoid);
  EXPECT_TRUE(c->expert_routing.renormalize);
  EXPECT_EQ(c->expert_routing.groups, 4);
  EXPECT_EQ(c->expert_routing.top_groups, 2);
  EXPECT_FLOAT_EQ(c->expert_routing.scale, 2.5f);

  nlohmann::json hub = {{"architectures", {"NemotronHForCausalLM"}},
                        {"vocab_size", 100},
                        {"hidden_size", 32},
                        {"hybrid_override_pattern", "MEM*E"},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},
                        {"head_dim", 8},
                        {"mamba_num_heads", 4},
                        {"mamba_head_dim", 16},
                        {"n_groups", 2},
                        {"ssm_state_size", 8},
                        {"n_routed_experts", 16},
                        {"num_experts_per_tok", 4},
                        {"moe_intermediate_size", 24},
                        {"moe_shared_expert_intermediate_size", 48},
                        {"n_group", 1},
                        {"topk_group", 1},
                        {"routed_scaling_factor", 2.5}};
  auto parsed = ParseModelConfig(hub, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->num_layers, 5);
  EXPECT_EQ(parsed->expert_latent_size, 0);  // Nemotron 3 Nano: no projection
  EXPECT_EQ(parsed->layers[1].ffn, FfnKind::kMoe);
  EXPECT_EQ(parsed->layers[3].attention_index, 0);
  EXPECT_EQ(parsed->intermediate_size, 0);  // no MLP layer: not required

  const std::vector<Refusal> refusals = {
      {"n_group", 3, "n_group"},     // 3 does not divide 16
      {"n_group", 16, "n_group"},    // groups of one
      {"topk_group", 2, "n_group"},  // more groups chosen than there are
      {"num_experts_per_tok", 17, "n_group"},
      {"n_shared_experts", 2, "n_shared_experts"},
      {"routed_scaling_factor", 0, "routed_scaling_factor"},
      {"routed_scaling_factor", 1e39, "routed_scaling_factor"},  // no float holds it
      {"moe_intermediate_size", 0, "moe_intermediate_size"},
      {"moe_latent_size", -4, "moe_latent_size"},
  };
  ExpectRefused(hub, refusals);
  // Four groups of four, the best two allowed: room for eight.
  nlohmann::json grouped = hub;
  grouped["n_group"] = 4;
  grouped["topk_group"] = 2;
  EXPECT_TRUE(ParseModelConfig(grouped, "config.json").ok());
}

TEST(ModelConfigTest, BambaLayersHalfRotaryAndTimeStepLimit) {
  auto c = LoadModelConfig(testing::ModelDir("bamba-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kBamba);
  ASSERT_EQ(c->num_layers, 5);
  for (int i = 0; i < 5; ++i) {
    const bool attention = i == 1 || i == 4;  // attn_layer_indices
    EXPECT_EQ(c->layers[i].mixer, attention ? MixerKind::kAttention : MixerKind::kMamba2) << i;
    EXPECT_EQ(c->layers[i].ffn, FfnKind::kDense) << i;
  }
  EXPECT_EQ(c->layers[4].attention_index, 1);
  EXPECT_EQ(c->layers[3].ssm_index, 2);
  EXPECT_TRUE(c->attention.rope);
  EXPECT_EQ(c->attention.head_dim, 16);
  EXPECT_EQ(c->attention.rope_dims, 8);  // half of each head
  EXPECT_EQ(c->mamba2.inner, 128);
  EXPECT_EQ(c->mamba2.head_dim, 16);  // "auto": inner / heads
  EXPECT_EQ(c->mamba2.norm_groups, 2);
  // transformers 5 writes the limit's infinity as {"__float__": "Infinity"}: no clamp.
  EXPECT_FLOAT_EQ(c->mamba2.dt_min, 0.0f);
  EXPECT_FLOAT_EQ(c->mamba2.dt_max, 0.0f);

  nlohmann::json hub = {{"architectures", {"BambaForCausalLM"}},
                        {"vocab_size", 100},
                        {"hidden_size", 32},
                        {"num_hidden_layers", 3},
                        {"attn_layer_indices", {2}},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},
                        {"intermediate_size", 64},
                        {"mamba_n_heads", 4},
                        {"mamba_n_groups", 2},
                        {"mamba_d_state", 8},
                        {"time_step_limit", {0.001, 0.1}}};
  auto parsed = ParseModelConfig(hub, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->mamba2.head_dim, 16);
  EXPECT_FLOAT_EQ(parsed->mamba2.dt_min, 0.001f);
  EXPECT_FLOAT_EQ(parsed->mamba2.dt_max, 0.1f);
  EXPECT_EQ(parsed->attention.rope_dims, 4);  // 0.5 of 8, with no rope_parameters at all
  nlohmann::json quarter = hub;
  quarter["head_dim"] = 16;
  quarter["rope_parameters"] = {{"rope_theta", 500000.0}, {"partial_rotary_factor", 0.25}};
  auto quartered = ParseModelConfig(quarter, "config.json");
  ASSERT_TRUE(quartered.ok()) << quartered.status();
  EXPECT_EQ(quartered->attention.rope_dims, 4);
  EXPECT_FLOAT_EQ(quartered->attention.rope_theta, 500000.0f);

  const std::vector<Refusal> refusals = {
      {"attn_layer_indices", {3}, "attn_layer_indices"},  // past the last layer
      {"attn_layer_indices", "2", "attn_layer_indices"},
      {"mlp_bias", true, "mlp_bias"},
      {"attention_bias", true, "attention_bias"},
      {"rope_scaling", {{"rope_type", "yarn"}}, "rope_scaling"},
      {"mamba_n_heads", 3, "mamba_n_heads"},
      {"time_step_limit", {0.1, 0.001}, "time_step_limit"},
      {"time_step_limit", {0.0, {{"__float__", "NaN"}}}, "time_step_limit"},
      {"head_dim", 2, "head_dim"},           // a rotated half of one dimension
      {"hidden_act", "gelu", "hidden_act"},  // the convolution's activation too
      {"rope_parameters", {{"rope_type", "yarn"}}, "rope_type"},
      {"rope_parameters", {{"partial_rotary_factor", 1.5}}, "partial_rotary_factor"},
  };
  ExpectRefused(hub, refusals);
}

TEST(ModelConfigTest, JsonTextKeepsInfinityInsideStrings) {
  auto j = ParseJsonText(R"({"a": "Infinity NaN", "b": [-Infinity, NaN]})", "test.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["a"], "Infinity NaN");
  EXPECT_LT((*j)["b"][0].get<double>(), -1e300);
  EXPECT_TRUE((*j)["b"][1].is_null());
  auto bad = ParseJsonText("{\"a\": }", "broken.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("broken.json"), std::string::npos);
}

TEST(ModelConfigTest, EosListAndLegacyZamba2Types) {
  nlohmann::json j = {{"architectures", {"Zamba2ForCausalLM"}},
                      {"vocab_size", 100},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 3},
                      {"layers_block_type", {"m", "g", "m"}},
                      {"n_mamba_heads", 4},
                      {"num_attention_heads", 4},
                      {"eos_token_id", {2, 7}}};
  auto c = ParseModelConfig(j, "inline");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hybrid_layer_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 7}));
  j["layers_block_type"] = {"m", "x", "m"};
  auto bad = ParseModelConfig(j, "inline");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layers_block_type"), std::string::npos);
}

TEST(ModelConfigTest, AbsurdDimensionsAreRefusedBeforeAnythingIsBuilt) {
  nlohmann::json j = {{"architectures", {"JambaForCausalLM"}},
                      {"vocab_size", 100},
                      {"hidden_size", 64},
                      {"num_hidden_layers", 2000000000}};
  auto c = ParseModelConfig(j, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'num_hidden_layers' must be in [1, 4096]"),
            std::string::npos)
      << c.status();
  j["num_hidden_layers"] = 2;
  j["num_attention_heads"] = 1 << 20;
  c = ParseModelConfig(j, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_attention_heads"), std::string::npos);
}

}  // namespace
}  // namespace tandem::models
