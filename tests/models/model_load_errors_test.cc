// Bad checkpoints are refused with errors that name the file, tensor or field at fault — never a
// crash. Each test copies a tiny fixture checkpoint into a temporary directory and breaks it.
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "model_test_util.h"
#include "models/json_file.h"
#include "models/model.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

class ModelLoadErrorsTest : public ::testing::Test {
 protected:
  // A writable copy of fixture `name`.
  std::string Copy(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() /
                         ("tandem_load_errors_" + std::to_string(::getpid()) + "_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::copy(ModelDir(name), dir, fs::copy_options::recursive);
    dirs_.push_back(dir);
    return dir.string();
  }
  void TearDown() override {
    for (const fs::path& d : dirs_) fs::remove_all(d);
  }
  // Applies `edit` to DIR/config.json.
  void EditConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    auto json = models::ReadJsonFile(dir + "/config.json");
    ASSERT_TRUE(json.ok()) << json.status();
    edit(*json);
    std::ofstream(dir + "/config.json") << json->dump(2);
  }
  static std::string LoadError(const std::string& dir) {
    auto model = models::Model::Load(dir);
    if (model.ok()) return "(loaded)";
    return std::string(model.status().message());
  }

  std::vector<fs::path> dirs_;
};

TEST_F(ModelLoadErrorsTest, UnknownArchitectureIsRefusedByName) {
  const std::string dir = Copy("jamba-tiny");
  EditConfig(dir, [](nlohmann::json& c) { c["architectures"] = {"LlamaForCausalLM"}; });
  auto model = models::Model::Load(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(model.status().message().find("LlamaForCausalLM"), std::string::npos);
}

TEST_F(ModelLoadErrorsTest, MissingOrCorruptConfigNamesTheFile) {
  const std::string dir = Copy("jamba-tiny");
  fs::remove(dir + "/config.json");
  EXPECT_NE(LoadError(dir).find("config.json"), std::string::npos) << LoadError(dir);
  std::ofstream(dir + "/config.json") << "{\"architectures\": [\"JambaForCausalLM\"";
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find("config.json"), std::string::npos) << error;
  EXPECT_NE(error.find("invalid JSON"), std::string::npos) << error;
}

TEST_F(ModelLoadErrorsTest, InconsistentConfigFieldIsNamed) {
  const std::string dir = Copy("jamba-tiny");
  EditConfig(dir, [](nlohmann::json& c) { c["num_key_value_heads"] = 3; });
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find("num_key_value_heads"), std::string::npos) << error;
  EditConfig(dir, [](nlohmann::json& c) {
    c["num_key_value_heads"] = 2;
    c["hidden_size"] = "sixty-four";
  });
  EXPECT_NE(LoadError(dir).find("'hidden_size'"), std::string::npos) << LoadError(dir);
}

TEST_F(ModelLoadErrorsTest, MissingTensorIsNamed) {
  const std::string dir = Copy("jamba-tiny");
  EditConfig(dir, [](nlohmann::json& c) { c["mamba_proj_bias"] = true; });
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find("model.layers.0.mamba.in_proj.bias"), std::string::npos) << error;
}

TEST_F(ModelLoadErrorsTest, ShapeMismatchNamesTensorAndShapes) {
  const std::string dir = Copy("jamba-tiny");
  EditConfig(dir, [](nlohmann::json& c) { c["vocab_size"] = 1000; });
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find("model.embed_tokens.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("[1000, 64]"), std::string::npos) << error;
  EXPECT_NE(error.find("[1024, 64]"), std::string::npos) << error;
}

TEST_F(ModelLoadErrorsTest, UnusedTensorsMeanConfigAndWeightsDisagree) {
  const std::string dir = Copy("jamba-tiny-projbias");
  EditConfig(dir, [](nlohmann::json& c) { c["mamba_proj_bias"] = false; });
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find("not used"), std::string::npos) << error;
  EXPECT_NE(error.find("mamba.in_proj.bias"), std::string::npos) << error;
}

TEST_F(ModelLoadErrorsTest, TruncatedWeightsNameTheFile) {
  const std::string dir = Copy("jamba-tiny");
  const std::string weights = dir + "/model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) / 2);
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
}

TEST_F(ModelLoadErrorsTest, MissingShardIsNamed) {
  const std::string dir = Copy("zamba2-tiny");
  std::string shard;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("model-", 0) == 0 && name.ends_with(".safetensors")) shard = name;
  }
  ASSERT_FALSE(shard.empty());
  fs::remove(dir + "/" + shard);
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find(shard), std::string::npos) << error;
}

TEST_F(ModelLoadErrorsTest, EveryFixtureLoads) {
  for (const char* name : {"jamba-tiny", "jamba-tiny-projbias", "zamba2-tiny", "zamba2-tiny-1block",
                           "mamba2-tiny", "granite-tiny", "granite-tiny-dense", "nemotron-h-tiny",
                           "nemotron3-tiny", "nemotron3-tiny-nolatent", "bamba-tiny"}) {
    auto model = models::Model::Load(ModelDir(name));
    EXPECT_TRUE(model.ok()) << name << ": " << model.status();
  }
}

}  // namespace
}  // namespace tandem::testing
