// `tandem perplexity` through the binary, on the bundled model (trained, so its perplexity on
// English means something): the JSON result and its windows, a text given as ids, the same
// figure whatever the batch and pass size, 16-bit weights close to fp32, and bad usage or input
// refused by name.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "models/json_file.h"
#include "run_tandem.h"

namespace {

using Output = tandem::testing::TandemOutput;
using tandem::testing::RunTandem;

// Our own prose (about 110 tokens for the bundled tokenizer).
constexpr char kText[] =
    "It was a fine morning in the country, and Elizabeth walked with her sister towards the "
    "village. They spoke of the ball, of the letter which had come from London, and of the "
    "officers. \"I cannot think him so very disagreeable,\" said Jane, \"when he is among his "
    "own friends.\" Elizabeth laughed, and said that she would rather think well of everybody "
    "than be thought unkind.\nMrs. Bennet was delighted with the news, and could talk of nothing "
    "else for the rest of the evening.";  // no final newline: the shell's $(cat) would drop it

class PerplexityCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tandem_perplexity_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    text_ = Write("text.txt", kText);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = dir_ / name;
    std::ofstream(path) << contents;
    return path;
  }

  nlohmann::json Json(const std::string& args) {
    const Output o = RunTandem("perplexity --threads 2 --json " + args);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    auto json = tandem::models::ParseJsonText(o.out, "stdout");
    EXPECT_TRUE(json.ok()) << o.out;
    return json.ok() ? *json : nlohmann::json();
  }

  std::filesystem::path dir_;
  std::string text_;
};

TEST_F(PerplexityCliTest, ScoresATextInWindows) {
  const nlohmann::json got = Json("--text-file " + text_ + " --context 64");
  const int64_t tokens = got["text_tokens"];
  ASSERT_GT(tokens, 64);
  ASSERT_LT(tokens, 127);  // two windows of 63 text tokens behind the BOS
  EXPECT_EQ(got["prefix"], nlohmann::json({1}));
  EXPECT_EQ(got["context"], 64);
  EXPECT_EQ(got["score_from"], 32);
  EXPECT_EQ(got["weight_dtype"], "auto");
  ASSERT_EQ(got["windows"].size(), 2u);
  EXPECT_EQ(got["windows"][0]["begin"], 0);
  EXPECT_EQ(got["windows"][0]["text_tokens"], 63);
  EXPECT_EQ(got["windows"][0]["scored_tokens"], 32);
  EXPECT_EQ(got["windows"][1]["begin"], 63);
  EXPECT_EQ(got["windows"][1]["text_tokens"], tokens - 63);
  EXPECT_EQ(got["windows"][1]["scored_tokens"], tokens - 63 + 1 - 32);
  EXPECT_EQ(got["scored_tokens"], 32 + tokens - 63 + 1 - 32);
  EXPECT_EQ(got["tokens_run"], 63 + tokens - 63);  // each window but its last token
  const double perplexity = got["perplexity"];
  EXPECT_DOUBLE_EQ(perplexity, std::exp(got["mean_nll"].get<double>()));
  // A model trained on Austen predicts Austen-like prose far better than chance (4,096 tokens)
  // and not perfectly.
  EXPECT_GT(perplexity, 2);
  EXPECT_LT(perplexity, 200);
  EXPECT_GT(got["perplexity_stderr"].get<double>(), 0);

  // Batching windows and cutting passes small changes no bit of it.
  const nlohmann::json batched = Json("--text-file " + text_ + " --context 64 --batch 2 --chunk 7");
  EXPECT_EQ(batched["perplexity"], got["perplexity"]);
  EXPECT_EQ(batched["windows"], got["windows"]);
}

TEST_F(PerplexityCliTest, TheWholeTextAndItsIdsGiveTheSameFigure) {
  const nlohmann::json whole = Json("--text-file " + text_ + " --context 0");
  const int64_t tokens = whole["text_tokens"];
  EXPECT_EQ(whole["score_from"], 1);
  EXPECT_EQ(whole["scored_tokens"], tokens);  // every text token, the first from the BOS alone
  ASSERT_EQ(whole["windows"].size(), 1u);

  // The same text as ids (generate's prompt_ids, BOS first), whitespace- and comma-separated.
  const Output tokenized =
      RunTandem("generate --max-new-tokens 0 --json --prompt \"$(cat " + text_ + ")\"");
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.err;
  auto prompt = tandem::models::ParseJsonText(tokenized.out, "stdout");
  ASSERT_TRUE(prompt.ok()) << tokenized.out;
  const nlohmann::json& prompt_ids = (*prompt)["prompt_ids"];
  ASSERT_EQ(prompt_ids[0], 1);
  std::string listed;
  for (size_t i = 1; i < prompt_ids.size(); ++i) {
    listed += std::to_string(prompt_ids[i].get<int>()) + (i % 10 == 0 ? ",\n" : ", ");
  }
  const nlohmann::json from_ids = Json("--ids-file " + Write("ids.txt", listed) + " --context 0");
  EXPECT_EQ(from_ids["text_tokens"], whole["text_tokens"]);
  EXPECT_EQ(from_ids["perplexity"], whole["perplexity"]);

  // Without the BOS the first token has nothing before it to be scored from.
  const nlohmann::json bare = Json("--text-file " + text_ + " --context 0 --no-bos");
  EXPECT_EQ(bare["prefix"], nlohmann::json::array());
  EXPECT_EQ(bare["scored_tokens"], tokens - 1);
}

// Memory is sized for the windows there are: a batch larger than their count, or a window
// larger than the text, costs nothing (a window of 2^30 positions would not fit otherwise).
TEST_F(PerplexityCliTest, MemoryFollowsTheTextNotTheFlags) {
  const nlohmann::json whole = Json("--text-file " + text_ + " --context 0");
  const nlohmann::json huge =
      Json("--text-file " + text_ + " --context 1073741824 --score-from 1 --batch 1024");
  EXPECT_EQ(huge["perplexity"], whole["perplexity"]);
  EXPECT_EQ(huge["scored_tokens"], whole["scored_tokens"]);
}

// A checkpoint without a tokenizer takes ids, behind config.json's BOS.
TEST_F(PerplexityCliTest, WithoutATokenizerIdsGoBehindTheConfigsBos) {
  const std::filesystem::path model = dir_ / "no-tokenizer";
  std::filesystem::create_directories(model);
  const std::string fixture = std::string(TANDEM_TEST_DATA) + "/models/jamba-tiny/";
  for (const char* file : {"config.json", "generation_config.json", "model.safetensors"}) {
    std::filesystem::copy_file(fixture + file, model / file);
  }
  const std::string ids = Write("fixture_ids.txt", "398 174 304 12 77 5 901 33 64 2 17 250");
  const nlohmann::json got =
      Json("--model " + model.string() + " --ids-file " + ids + " --context 0");
  EXPECT_EQ(got["prefix"], nlohmann::json({1}));
  EXPECT_EQ(got["scored_tokens"], 12);
  const nlohmann::json with_tokenizer =
      Json("--model " + fixture + " --ids-file " + ids + " --context 0");
  EXPECT_EQ(with_tokenizer["perplexity"], got["perplexity"]);

  const Output text = RunTandem("perplexity --model " + model.string() + " --text-file " + text_);
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.err.find("--text-file needs the checkpoint's tokenizer"), std::string::npos)
      << text.err;
}

TEST_F(PerplexityCliTest, SixteenBitWeightsScoreCloseToFp32) {
  const nlohmann::json f32 = Json("--text-file " + text_ + " --context 0");
  const nlohmann::json bf16 = Json("--text-file " + text_ + " --context 0 --weight-dtype bf16");
  EXPECT_EQ(bf16["weight_dtype"], "bf16");
  const double ratio = bf16["perplexity"].get<double>() / f32["perplexity"].get<double>();
  EXPECT_NEAR(ratio, 1.0, 0.02);
}

// --compare-weight-dtype runs the checkpoint a second time, in other weights, on the same windows.
TEST_F(PerplexityCliTest, ComparesWeightFormatsOnTheSameWindows) {
  const std::string args = "--text-file " + text_ + " --context 64 --weight-dtype f32";
  const nlohmann::json plain = Json(args);
  const nlohmann::json same = Json(args + " --compare-weight-dtype f32");
  EXPECT_EQ(same["perplexity"], plain["perplexity"]);
  ASSERT_TRUE(same.contains("compared")) << same.dump();
  EXPECT_EQ(same["compared"]["weight_dtype"], "f32");
  EXPECT_EQ(same["compared"]["perplexity"], plain["perplexity"]);
  EXPECT_EQ(same["compared"]["kl_divergence"]["max"], 0.0);
  EXPECT_EQ(same["compared"]["same_top_token_rate"], 1.0);

  const nlohmann::json int8 = Json(args + " --compare-weight-dtype int8");
  EXPECT_EQ(int8["perplexity"], plain["perplexity"]);  // the reference is unchanged
  const nlohmann::json& compared = int8["compared"];
  EXPECT_EQ(compared["weight_dtype"], "int8");
  EXPECT_EQ(compared["scored_tokens"], plain["scored_tokens"]);
  EXPECT_NEAR(compared["perplexity"].get<double>() / plain["perplexity"].get<double>(), 1.0, 0.02);
  const double mean = compared["kl_divergence"]["mean"];
  EXPECT_GT(mean, 0);
  EXPECT_LT(mean, 0.01);
  EXPECT_LE(compared["kl_divergence"]["median"].get<double>(),
            compared["kl_divergence"]["p99"].get<double>());
  EXPECT_LE(compared["kl_divergence"]["p99"].get<double>(),
            compared["kl_divergence"]["max"].get<double>());
  EXPECT_GT(compared["same_top_token_rate"].get<double>(), 0.9);

  const Output human = RunTandem("perplexity --threads 2 " + args + " --compare-weight-dtype bf16");
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_EQ(human.out.rfind("f32: perplexity ", 0), 0u) << human.out;
  EXPECT_NE(human.out.find("\nbf16: perplexity "), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("\nKL divergence "), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("the same most likely token at "), std::string::npos) << human.out;

  const Output bad = RunTandem("perplexity " + args + " --compare-weight-dtype q4");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--compare-weight-dtype: "), std::string::npos) << bad.err;
}

// --compare-model compares with another checkpoint of the same vocabulary.
TEST_F(PerplexityCliTest, ComparesAnotherCheckpoint) {
  const std::string fixtures = std::string(TANDEM_TEST_DATA) + "/models/";
  const std::string ids = Write("ids.txt", "398 174 304 12 77 5 901 33 64 2 17 250 9 400 3 88");
  // jamba-tiny-projbias is jamba-tiny's architecture with projection biases: other weights.
  const nlohmann::json got =
      Json("--model " + fixtures + "jamba-tiny --ids-file " + ids +
           " --context 0 --compare-model " + fixtures + "jamba-tiny-projbias");
  ASSERT_TRUE(got.contains("compared")) << got.dump();
  EXPECT_EQ(got["compared"]["model"], fixtures + "jamba-tiny-projbias");
  EXPECT_EQ(got["compared"]["scored_tokens"], 16);
  EXPECT_GT(got["compared"]["kl_divergence"]["mean"].get<double>(), 0);
  const nlohmann::json itself = Json("--model " + fixtures + "jamba-tiny --ids-file " + ids +
                                     " --context 0 --compare-model " + fixtures + "jamba-tiny");
  EXPECT_EQ(itself["compared"]["kl_divergence"]["max"], 0.0);

  // Another vocabulary (the bundled model's 4,096 against 1,024), or no checkpoint at all.
  const Output other = RunTandem("perplexity --ids-file " + ids + " --context 0 --compare-model " +
                                 fixtures + "jamba-tiny");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("the models' vocabularies differ: 4096 and 1024 tokens"),
            std::string::npos)
      << other.err;
  const Output missing = RunTandem("perplexity --ids-file " + ids +
                                   " --context 0 --compare-model " + (dir_ / "nowhere").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("the compared model, auto, " + (dir_ / "nowhere").string() + ": "),
            std::string::npos)
      << missing.err;
}

// --compare-backend and --compare-device run the same checkpoint elsewhere: the fast CPU kernels
// against the reference loops differ by rounding only; the same device by nothing.
TEST_F(PerplexityCliTest, ComparesBackendsAndDevices) {
  const std::string model = std::string(TANDEM_TEST_DATA) + "/models/jamba-tiny";
  const std::string ids = Write("ids.txt", "398 174 304 12 77 5 901 33 64 2 17 250 9 400 3 88");
  const std::string args = "--model " + model + " --ids-file " + ids + " --context 0";
  const nlohmann::json loops = Json(args + " --compare-backend reference");
  const nlohmann::json& compared = loops["compared"];
  EXPECT_EQ(compared["backend"], "reference");
  EXPECT_EQ(compared["label"], "auto, reference backend");
  EXPECT_LT(compared["kl_divergence"]["max"].get<double>(), 1e-8);
  EXPECT_EQ(compared["same_top_token_rate"], 1.0);
  EXPECT_NEAR(compared["perplexity"].get<double>() / loops["perplexity"].get<double>(), 1.0, 1e-5);

  const nlohmann::json same = Json(args + " --compare-device cpu");
  EXPECT_EQ(same["compared"]["device"], "cpu");
  EXPECT_EQ(same["compared"]["kl_divergence"]["max"], 0.0);

  for (const auto& [flags, message] :
       {std::pair<std::string, std::string>{
            "--compare-backend gpu", "--compare-backend must be cpu or reference, got 'gpu'"},
        {"--compare-backend reference --compare-device cuda",
         "--compare-backend reference runs on the CPU only"}}) {
    const Output bad = RunTandem("perplexity " + args + " " + flags);
    EXPECT_EQ(bad.exit_code, 2) << flags;
    EXPECT_NE(bad.err.find(message), std::string::npos) << bad.err;
  }
}

TEST_F(PerplexityCliTest, HumanOutputAndProgress) {
  const Output o = RunTandem("perplexity --threads 2 --text-file " + text_ + " --context 64");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out.rfind("perplexity ", 0), 0u) << o.out;
  EXPECT_NE(o.out.find(" ± "), std::string::npos);
  EXPECT_NE(o.err.find("2 windows of 64 behind the prefix [1], scored from position 32"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("[2/2] perplexity "), std::string::npos) << o.err;
}

TEST_F(PerplexityCliTest, BadUsageAndInputAreNamed) {
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const std::string missing = (dir_ / "missing.txt").string();
  const std::string bad_ids = Write("bad_ids.txt", "5, 6,\n7 x8 9");
  const std::string short_text = Write("short.txt", "Emma");
  const Case cases[] = {
      {"", 2, "give exactly one of --text-file and --ids-file"},
      {"--text-file " + text_ + " --ids-file " + bad_ids, 2,
       "give exactly one of --text-file and --ids-file"},
      {"--text-file " + text_ + " --context 1", 2, "--context must be 0 (the whole text) or at"},
      {"--text-file " + text_ + " --context 64 --score-from 64", 2,
       "--score-from must be below --context (64), got 64"},
      {"--text-file " + text_ + " --batch 0", 2, "--batch"},
      {"--text-file " + missing, 1, "--text-file: cannot open '" + missing + "'"},
      {"--ids-file " + bad_ids, 1, "entry 3 ('x8' at byte 8) is not a token id"},
      {"--text-file " + short_text, 1, "leave nothing to score"},
      {"--ids-file " + Write("big_id.txt", "1 2 5000 3") + " --context 0", 1,
       "text token 2 is 5000, outside the vocabulary [0, 4096)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Output o = RunTandem("perplexity " + c.args);
    EXPECT_EQ(o.exit_code, c.exit_code) << o.err;
    EXPECT_NE(o.err.find(c.message), std::string::npos) << o.err;
  }
}

}  // namespace
