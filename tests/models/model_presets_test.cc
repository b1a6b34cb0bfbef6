// The random-weight presets the benchmarks time (bench-engine --preset, model_speed,
// device_model_speed): each parses, is the size its name says, and runs to finite logits, so a
// benchmark never times a model that could not serve.
#include "models/model_presets.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "model_test_util.h"

namespace tandem::models {
namespace {

TEST(ModelPresetsTest, EveryPresetIsAboutAHundredMillionParametersAndRuns) {
  for (const std::string& name : ModelPresetNames()) {
    SCOPED_TRACE(name);
    auto model = RandomPresetModel(name, 7);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_GT((*model)->parameters(), 50'000'000u);
    EXPECT_LT((*model)->parameters(), 200'000'000u);
    auto ops = kernels::MakeCpuOps(2);
    kernels::Workspace ws;
    testing::TestSequence seq(**model);
    const std::vector<int32_t> prompt = {5, 900, 17, 4000, 12, 3, 77, 16000};
    const std::vector<float> logits =
        testing::RunTokens(**model, *ops, ws, seq, prompt, /*all_logits=*/false);
    ASSERT_EQ(logits.size(), static_cast<size_t>((*model)->config().vocab_size));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(ModelPresetsTest, AnUnknownPresetIsRefusedWithTheKnownOnes) {
  auto config = ModelPreset("granite-7b");
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_NE(message.find("granite-7b"), std::string::npos) << message;
  EXPECT_NE(message.find("granite-100m"), std::string::npos) << message;
}

}  // namespace
}  // namespace tandem::models
