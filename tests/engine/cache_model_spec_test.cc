// The cache's accounting of a model's state must equal what the model really stores.
#include "engine/cache_model_spec.h"

#include <string>

#include "gtest/gtest.h"
#include "models/model.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

TEST(CacheModelSpecTest, BytesMatchTheModelsStateLayout) {
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    const std::string dir = std::string(TANDEM_TEST_DATA) + "/models/" + name;
    auto model = models::Model::Load(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    auto spec = LoadCacheModelSpec(dir);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const models::StateLayout& layout = (*model)->layout();
    EXPECT_EQ(spec->kv_bytes_per_token(), layout.kv_page_bytes() / layout.page_tokens());
    size_t state_bytes = 0;
    for (int i = 0; i < (*model)->config().num_ssm_layers; ++i) {
      state_bytes += (layout.ssm_layer(i).conv_floats + layout.ssm_layer(i).ssm_floats) * 4;
    }
    EXPECT_EQ(spec->ssm_state_bytes(), state_bytes);
    EXPECT_GT(spec->fixed_flops_per_token(), 0);
    EXPECT_EQ(spec->attention_flops_per_key() > 0, (*model)->config().num_attention_layers > 0);
  }
}

TEST(CacheModelSpecTest, GraniteCountsItsSharedMlp) {
  // With experts the shared MLP runs beside them in every layer; without, it is the layer's MLP.
  auto moe = LoadCacheModelSpec(std::string(TANDEM_TEST_DATA) + "/models/granite-tiny");
  ASSERT_TRUE(moe.ok()) << moe.status();
  EXPECT_EQ(moe->ffn.moe_layers, 6);
  EXPECT_EQ(moe->ffn.experts, 4);
  EXPECT_EQ(moe->ffn.expert_intermediate, 32);
  EXPECT_EQ(moe->ffn.shared_intermediate, 48);
  auto dense = LoadCacheModelSpec(std::string(TANDEM_TEST_DATA) + "/models/granite-tiny-dense");
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->ffn.dense_layers, 4);
  EXPECT_EQ(dense->ffn.moe_layers, 0);
  EXPECT_EQ(dense->ffn.intermediate, 48);
}

TEST(CacheModelSpecTest, MissingDirectoryIsAnError) {
  auto spec = LoadCacheModelSpec("/nonexistent/model");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("/nonexistent/model"), std::string::npos);
}

}  // namespace
}  // namespace tandem::engine
