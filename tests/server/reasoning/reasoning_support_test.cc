// The server's side of reasoning (server/reasoning/reasoning_support.h): the format configured or
// read from the chat template, whether a prompt opened the block (however its tokens spell the
// marker), the markers kept in the text where they are special tokens, and no split for
// constrained outputs.
#include "server/reasoning/reasoning_support.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "engine/json_schema_grammar.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::server {
namespace {

using json = nlohmann::json;

const std::string kFixture = std::string(TANDEM_TEST_DATA) + "/models/zamba2-tiny";

std::unique_ptr<models::Tokenizer> Load(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer = models::LoadTokenizer(dir);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// The fixture's tokenizer with its padding token renamed "<think>" (a special token, as in some
// reasoning models' vocabularies) and a template that ends the prompt with it, loaded from files
// written for it and removed. `end_too`: its unknown token renamed "</think>" as well.
std::unique_ptr<models::Tokenizer> LoadSpecialMarkerTokenizer(bool end_too = false) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("special_think_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  json tokenizer = json::parse(std::ifstream(kFixture + "/tokenizer.json"));
  json& vocab = tokenizer["model"]["vocab"];
  std::vector<std::pair<std::string, std::string>> renamed = {{"<|pad|>", "<think>"}};
  if (end_too) renamed.emplace_back("<|unk|>", "</think>");
  for (const auto& [from, to] : renamed) {
    vocab[to] = vocab[from];
    vocab.erase(from);
    for (json& added : tokenizer["added_tokens"]) {
      if (added["content"] == from) added["content"] = to;
    }
  }
  if (end_too) tokenizer["model"]["unk_token"] = "<|endoftext|>";
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  json config = json::parse(std::ifstream(kFixture + "/tokenizer_config.json"));
  config["added_tokens_decoder"]["0"]["content"] = "<think>";
  config["pad_token"] = "<|endoftext|>";
  if (end_too) {
    config["added_tokens_decoder"]["3"]["content"] = "</think>";
    config["unk_token"] = "<|endoftext|>";
  }
  config["chat_template"] =
      "{% for m in messages %}{{ m['content'].split('</think>')[-1] }}{% endfor %}"
      "{{ '<|im_start|>assistant\\n<think>\\n' }}";
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  std::unique_ptr<models::Tokenizer> tokenizer_loaded = Load(dir.string());
  fs::remove_all(dir);
  return tokenizer_loaded;
}

engine::Request Prompt(const models::Tokenizer& tokenizer, const std::string& text) {
  engine::Request request;
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, /*add_special_tokens=*/false);
  EXPECT_TRUE(ids.ok()) << ids.status();
  if (ids.ok()) request.prompt = *ids;
  return request;
}

TEST(ReasoningSupportTest, TheFormatIsConfiguredOrTheTemplates) {
  std::unique_ptr<models::Tokenizer> chatml = Load(kFixture);
  ASSERT_NE(chatml, nullptr);
  const ReasoningSupport detected(chatml.get(), std::nullopt);
  EXPECT_EQ(detected.format(), ReasoningFormat::kNone);  // ChatML shows no block
  EXPECT_FALSE(detected.configured());
  engine::Request request = Prompt(*chatml, "<|im_start|>assistant\n<think>\n");
  EXPECT_FALSE(detected.Apply(&request).has_value());

  const ReasoningSupport configured(chatml.get(), ReasoningFormat::kThink);
  EXPECT_EQ(configured.format(), ReasoningFormat::kThink);
  EXPECT_TRUE(configured.configured());
  const ReasoningSupport none(chatml.get(), ReasoningFormat::kNone);
  EXPECT_FALSE(none.Apply(&request).has_value());
  EXPECT_FALSE(ReasoningSupport(nullptr, ReasoningFormat::kThink).Apply(&request).has_value());

  std::unique_ptr<models::Tokenizer> special = LoadSpecialMarkerTokenizer();
  ASSERT_NE(special, nullptr);
  EXPECT_EQ(ReasoningSupport(special.get(), std::nullopt).format(), ReasoningFormat::kThink);
}

TEST(ReasoningSupportTest, APromptOpensTheBlockWhenItEndsWithTheStartMarker) {
  std::unique_ptr<models::Tokenizer> chatml = Load(kFixture);
  ASSERT_NE(chatml, nullptr);
  const ReasoningSupport support(chatml.get(), ReasoningFormat::kThink);
  struct {
    const char* prompt;
    bool opened;
  } cases[] = {
      {"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n", true},
      {"<|im_start|>assistant\n<think>", true},
      {"<think>  \n\n", true},
      {"<|im_start|>assistant\n<think>\n\n</think>\n\n", false},  // reasoning turned off
      {"<|im_start|>assistant\n", false},
      {"<think> x", false},
      {"", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.prompt);
    engine::Request request = Prompt(*chatml, c.prompt);
    std::optional<ReasoningUse> use = support.Apply(&request);
    ASSERT_TRUE(use.has_value());
    EXPECT_EQ(use->format, ReasoningFormat::kThink);
    EXPECT_EQ(use->opened, c.opened);
    EXPECT_TRUE(request.shown_special_tokens.empty());  // the markers are plain text here
  }
  // A long prompt: only its end counts.
  engine::Request long_prompt =
      Prompt(*chatml, std::string(3000, 'a') + "<|im_start|>assistant\n<think>\n");
  EXPECT_TRUE(support.Apply(&long_prompt)->opened);
}

TEST(ReasoningSupportTest, AConstrainedOutputIsNotSplit) {
  std::unique_ptr<models::Tokenizer> chatml = Load(kFixture);
  ASSERT_NE(chatml, nullptr);
  const ReasoningSupport support(chatml.get(), ReasoningFormat::kThink);
  engine::Request request = Prompt(*chatml, "<|im_start|>assistant\n<think>\n");
  request.grammar = std::make_shared<const engine::Grammar>(engine::JsonObjectGrammar());
  EXPECT_FALSE(support.Apply(&request).has_value());
}

TEST(ReasoningSupportTest, SpecialMarkersStayInTheText) {
  std::unique_ptr<models::Tokenizer> special = LoadSpecialMarkerTokenizer();
  ASSERT_NE(special, nullptr);
  const int32_t think = special->PieceToId("<think>");
  ASSERT_GE(think, 0);
  ASSERT_TRUE(special->IsSpecial(think));
  const ReasoningSupport support(special.get(), std::nullopt);
  engine::Request request = Prompt(*special, "<|im_start|>assistant\n<think>\n");
  ASSERT_FALSE(request.prompt.empty());
  request.shown_special_tokens = {5};  // kept, as a tool-call format's would be
  std::optional<ReasoningUse> use = support.Apply(&request);
  ASSERT_TRUE(use.has_value());
  EXPECT_TRUE(use->opened);  // the special token spells the marker
  EXPECT_EQ(request.shown_special_tokens, (std::vector<int32_t>{5, think}));
  support.Apply(&request);  // added once
  EXPECT_EQ(
      std::count(request.shown_special_tokens.begin(), request.shown_special_tokens.end(), think),
      1);
}

// Usage::reasoning_tokens is counted on token ids (engine/reasoning_tokens.h): a split answer's
// request carries its markers' ids where each is a single token, and -1 where it is not.
TEST(ReasoningSupportTest, ASplitAnswerCarriesItsMarkersTokenIds) {
  std::unique_ptr<models::Tokenizer> both = LoadSpecialMarkerTokenizer(/*end_too=*/true);
  ASSERT_NE(both, nullptr);
  const int32_t think = both->PieceToId("<think>"), end = both->PieceToId("</think>");
  ASSERT_GE(think, 0);
  ASSERT_GE(end, 0);
  const ReasoningSupport counted(both.get(), std::nullopt);
  engine::Request opened = Prompt(*both, "<|im_start|>assistant\n<think>\n");
  ASSERT_TRUE(counted.Apply(&opened).has_value());
  ASSERT_TRUE(opened.reasoning_block.has_value());
  EXPECT_EQ(opened.reasoning_block->start_token, think);
  EXPECT_EQ(opened.reasoning_block->end_token, end);
  EXPECT_TRUE(opened.reasoning_block->opened);
  engine::Request closed = Prompt(*both, "<|im_start|>assistant\n");
  ASSERT_TRUE(counted.Apply(&closed).has_value());
  ASSERT_TRUE(closed.reasoning_block.has_value());
  EXPECT_FALSE(closed.reasoning_block->opened);

  // The plain fixture spells the markers in several tokens: not countable.
  std::unique_ptr<models::Tokenizer> chatml = Load(kFixture);
  ASSERT_NE(chatml, nullptr);
  const ReasoningSupport uncounted(chatml.get(), ReasoningFormat::kThink);
  engine::Request plain = Prompt(*chatml, "<|im_start|>assistant\n<think>\n");
  ASSERT_TRUE(uncounted.Apply(&plain).has_value());
  ASSERT_TRUE(plain.reasoning_block.has_value());
  EXPECT_EQ(plain.reasoning_block->start_token, -1);
  EXPECT_EQ(plain.reasoning_block->end_token, -1);

  // Not split (a grammar constrains it): nothing to count.
  engine::Request constrained = Prompt(*both, "<|im_start|>assistant\n<think>\n");
  constrained.grammar = std::make_shared<const engine::Grammar>(engine::JsonObjectGrammar());
  EXPECT_FALSE(counted.Apply(&constrained).has_value());
  EXPECT_FALSE(constrained.reasoning_block.has_value());
}

}  // namespace
}  // namespace tandem::server
