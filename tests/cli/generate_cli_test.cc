// The external interface of `tandem generate` (checked by outside tools, so kept stable): flags,
// --json output, --dump-logits .npy, progress on stderr, and exit codes for bad usage.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "run_tandem.h"
#include "models/json_file.h"
#include "models/npy.h"

namespace {

using Output = tandem::testing::TandemOutput;
using tandem::testing::RunTandem;

std::string Model(const std::string& name) {
  return std::string(TANDEM_TEST_DATA) + "/models/" + name;
}

TEST(GenerateCliTest, JsonWithPromptIdsAndLogitsDump) {
  const std::string npy = std::filesystem::temp_directory_path() / "tandem_cli_logits.npy";
  const Output o = RunTandem("generate --model " + Model("jamba-tiny") +
                             " --prompt-ids 398,174,304 --max-new-tokens 5 --greedy --json "
                             "--dump-logits " +
                             npy);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto json = tandem::models::ParseJsonText(o.out, "stdout");
  ASSERT_TRUE(json.ok()) << o.out;
  EXPECT_EQ((*json)["prompt_ids"], nlohmann::json({398, 174, 304}));
  ASSERT_EQ((*json)["output_ids"].size(), 5u);
  EXPECT_TRUE((*json)["text"].is_string());
  EXPECT_NE(o.err.find("loaded "), std::string::npos);  // loading reported on stderr

  auto logits = tandem::models::ReadNpy(npy);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{5, 1024}));
  // Row i holds the logits output token i was chosen from (greedy: its argmax).
  for (int i = 0; i < 5; ++i) {
    const float* row = logits->data.data() + i * 1024;
    EXPECT_EQ(std::max_element(row, row + 1024) - row, (*json)["output_ids"][i].get<int>());
  }
  std::filesystem::remove(npy);
}

// End to end through the binary: greedy generation gives transformers' greedy tokens for every
// family (the len007 case of each reference; none of its tokens is EOS, so none stops early).
TEST(GenerateCliTest, GreedyGenerationReproducesTransformersForEveryFamily) {
  for (const char* name :
       {"jamba-tiny", "zamba2-tiny", "mamba2-tiny", "granite-tiny", "granite-tiny-dense",
        "nemotron-h-tiny", "nemotron3-tiny", "nemotron3-tiny-nolatent", "bamba-tiny"}) {
    SCOPED_TRACE(name);
    auto manifest = tandem::models::ReadJsonFile(std::string(TANDEM_TEST_DATA) + "/reference/" +
                                                 name + "/manifest.json");
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    nlohmann::json reference;
    for (const auto& c : (*manifest)["cases"]) {
      if (c["name"] == "len007") reference = c;
    }
    ASSERT_TRUE(reference.is_object());
    std::string ids;
    for (const auto& id : reference["prompt_ids"]) {
      ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    }
    // transformers 4.57.1 clamps Zamba2's dt (the fixtures' manifests say so).
    const std::string clamp =
        std::string(name) == "zamba2-tiny" ? " --zamba2-dt-clamp time_step_min" : "";
    const Output o = RunTandem("generate --model " + Model(name) + " --prompt-ids " + ids +
                               " --max-new-tokens 8 --greedy --json" + clamp);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto json = tandem::models::ParseJsonText(o.out, "stdout");
    ASSERT_TRUE(json.ok()) << o.out;
    EXPECT_EQ((*json)["output_ids"], reference["greedy_ids"]);
  }
}

TEST(GenerateCliTest, TextPromptIsTokenizedAndSeededSamplingRepeats) {
  const std::string args = "generate --model " + Model("zamba2-tiny") +
                           " --prompt 'Hello world' --max-new-tokens 6 --temperature 0.8 "
                           "--top-p 0.9 --top-k 50 --seed 3 --json";
  const Output a = RunTandem(args), b = RunTandem(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  auto json = tandem::models::ParseJsonText(a.out, "stdout");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["prompt_ids"][0], 1);  // BOS from tokenizer_config.json
}

TEST(GenerateCliTest, PlainOutputIsTheText) {
  const Output o = RunTandem("generate --model " + Model("mamba2-tiny") +
                             " --prompt 'The cat' --max-new-tokens 4");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_FALSE(o.out.empty());
  EXPECT_EQ(o.out.find('{'), std::string::npos);
}

// --weight-dtype: the bf16 fixture's own format (auto) and its fp32 widening generate the same
// tokens; int8 generates too; the load line says which storage was used.
TEST(GenerateCliTest, WeightDtypeChoosesTheStorage) {
  const std::string base = "generate --model " + Model("mamba2-tiny") +
                           " --prompt-ids 5,6,7 --max-new-tokens 4 --json --weight-dtype ";
  const Output as_stored = RunTandem(base + "auto"), widened = RunTandem(base + "f32");
  ASSERT_EQ(as_stored.exit_code, 0) << as_stored.err;
  ASSERT_EQ(widened.exit_code, 0) << widened.err;
  EXPECT_EQ(as_stored.out, widened.out);
  EXPECT_NE(as_stored.err.find("(auto)"), std::string::npos) << as_stored.err;
  const Output int8 = RunTandem(base + "int8");
  ASSERT_EQ(int8.exit_code, 0) << int8.err;
  EXPECT_NE(int8.err.find("(int8)"), std::string::npos) << int8.err;
  auto json = tandem::models::ParseJsonText(int8.out, "stdout");
  ASSERT_TRUE(json.ok()) << int8.out;
  EXPECT_EQ((*json)["output_ids"].size(), 4u);
}

// --tensor-parallel: the model split over worker threads generates the whole model's tokens; a
// split the model's dimensions do not allow fails naming the dimension.
TEST(GenerateCliTest, TensorParallelGeneratesTheWholeModelsTokens) {
  for (const char* name : {"granite-tiny", "jamba-tiny"}) {
    SCOPED_TRACE(name);
    const std::string base = "generate --model " + Model(name) +
                             " --prompt-ids 398,174,304,12 --max-new-tokens 6 --greedy --json";
    const Output whole = RunTandem(base), split = RunTandem(base + " --tensor-parallel 2");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    ASSERT_EQ(split.exit_code, 0) << split.err;
    EXPECT_EQ(split.out, whole.out);
  }
  const Output three =
      RunTandem("generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --tensor-parallel 3");
  EXPECT_EQ(three.exit_code, 1);
  EXPECT_NE(three.err.find("attention head count (4) is not divisible by 3"), std::string::npos)
      << three.err;
}

TEST(GenerateCliTest, BadUsageExitsTwoWithAMessageNamingTheProblem) {
  struct Case {
    std::string args;
    std::string expected;
  } cases[] = {
      {"generate --prompt hi --model", "--model needs a value"},
      {"generate --model " + Model("jamba-tiny"), "exactly one of --prompt and --prompt-ids"},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1,x", "'x' is not an integer"},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --greedy --seed 3",
       "--greedy cannot be combined"},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --temperature -1",
       "temperature"},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --bogus 1", "--bogus"},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --weight-dtype fp8",
       "--weight-dtype: unknown weight dtype \"fp8\""},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --gpu-tensor-cores",
       "--gpu-tensor-cores needs a GPU (--device cuda or cuda:N)"},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --gpu-graphs",
       "--gpu-graphs needs a GPU (--device cuda or cuda:N)"},
      {"generate --model " + Model("jamba-tiny") + " --prompt-ids 1 --tensor-parallel 0",
       "--tensor-parallel must be in [1, 64], got 0"},
      {"generate --model " + Model("jamba-tiny") +
           " --prompt-ids 1 --tensor-parallel 2 "
           "--backend reference",
       "--tensor-parallel runs the fast CPU backend"},
      {"generate --model " + Model("jamba-tiny") +
           " --prompt-ids 1 --tensor-parallel 2 "
           "--device cuda",
       "--tensor-parallel 2 runs on --device cpu only"},
      {"frobnicate", "unknown command"},
  };
  for (const Case& c : cases) {
    const Output o = RunTandem(c.args);
    EXPECT_EQ(o.exit_code, 2) << c.args;
    EXPECT_NE(o.err.find(c.expected), std::string::npos) << c.args << "\n" << o.err;
  }
}

TEST(GenerateCliTest, RuntimeErrorsExitOneWithoutCrashing) {
  const Output missing = RunTandem("generate --model /nonexistent/model --prompt-ids 1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model"), std::string::npos) << missing.err;
  const Output vocab = RunTandem("generate --model " + Model("jamba-tiny") +
                                 " --prompt-ids 1,99999 --max-new-tokens 2");
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_NE(vocab.err.find("99999"), std::string::npos) << vocab.err;
}

}  // namespace
