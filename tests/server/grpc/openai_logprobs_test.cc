// OpenAI's logprobs objects from engine events, without a tokenizer: tokens spelled as vLLM
// spells them, -inf as OpenAI's floor, a stream's parts each holding only their own tokens, and a
// completion's offsets running on across them.
#include "server/openai/openai_logprobs.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "models/tokenizer.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

engine::Event TokensEvent(std::vector<int32_t> tokens,
                          std::vector<std::vector<engine::TopLogprob>> logprobs) {
  engine::Event event;
  event.tokens = std::move(tokens);
  event.logprobs = std::move(logprobs);
  return event;
}

TEST(OpenAiLogprobsTest, ChatEntriesListEachTokenWithItsLikeliestRivals) {
  OpenAiLogprobs logprobs(/*chat=*/true, /*tokenizer=*/nullptr);
  EXPECT_TRUE(logprobs.empty());
  logprobs.Add(TokensEvent({7}, {{{7, -0.5f}, {7, -0.5f}, {9, -1.0f}}}));
  EXPECT_FALSE(logprobs.empty());
  json out = logprobs.Take();
  ASSERT_EQ(out["content"].size(), 1u) << out;
  EXPECT_EQ(out["content"][0]["token"], "token_id:7");
  EXPECT_EQ(out["content"][0]["logprob"], -0.5);
  EXPECT_EQ(out["content"][0]["bytes"], json::array());
  ASSERT_EQ(out["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(out["content"][0]["top_logprobs"][1]["token"], "token_id:9");
  EXPECT_TRUE(out["refusal"].is_null());

  // The next part holds only its own tokens; an impossible token's logprob is a JSON number.
  EXPECT_TRUE(logprobs.empty());
  logprobs.Add(TokensEvent({3, 4}, {{{3, -std::numeric_limits<float>::infinity()}},
                                    {{4, -0.25f}}}));
  out = logprobs.Take();
  ASSERT_EQ(out["content"].size(), 2u) << out;
  EXPECT_EQ(out["content"][0]["logprob"], -9999.0);
  EXPECT_EQ(out["content"][1]["token"], "token_id:4");
  EXPECT_EQ(logprobs.Take()["content"], json::array());
}

TEST(OpenAiLogprobsTest, CompletionListsRunInParallelAndOffsetsRunOn) {
  OpenAiLogprobs logprobs(/*chat=*/false, /*tokenizer=*/nullptr);
  // An event without logprobs (none were asked for) adds nothing.
  logprobs.Add(TokensEvent({1}, {}));
  EXPECT_TRUE(logprobs.empty());
  logprobs.Add(TokensEvent({12, 5}, {{{12, -0.1f}, {5, -0.05f}}, {{5, -0.3f}}}));
  json first = logprobs.Take();
  EXPECT_EQ(first["tokens"], json({"token_id:12", "token_id:5"}));
  EXPECT_EQ(first["token_logprobs"].size(), 2u);
  // The chosen token is in its map even when it is not among the likeliest.
  EXPECT_EQ(first["top_logprobs"][0].size(), 2u) << first;
  EXPECT_FLOAT_EQ(first["top_logprobs"][0]["token_id:12"].get<float>(), -0.1f);
  EXPECT_EQ(first["text_offset"], json({0, 11}));  // "token_id:12" is 11 characters
  logprobs.Add(TokensEvent({8}, {{{8, -2.0f}}}));
  EXPECT_EQ(logprobs.Take()["text_offset"], json({21}));
}

// With a tokenizer, offsets count the characters of the text: a special token the text leaves
// out counts nothing, and a character split across byte tokens counts once.
TEST(OpenAiLogprobsTest, CompletionOffsetsCountTheTextsCharacters) {
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
      models::LoadTokenizer(std::string(TANDEM_TEST_DATA) + "/tokenizers/tiny-spm");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const models::Tokenizer& tok = **tokenizer;
  const int32_t special = tok.PieceToId("<|im_start|>");
  ASSERT_TRUE(tok.IsSpecial(special));
  absl::StatusOr<std::vector<int32_t>> e_acute = tok.Encode("\xC3\xA9", false);
  ASSERT_TRUE(e_acute.ok());
  std::vector<int32_t> ids = {special};
  ids.insert(ids.end(), e_acute->begin(), e_acute->end());
  ids.push_back(special);
  std::vector<std::vector<engine::TopLogprob>> logprobs;
  for (int32_t id : ids) logprobs.push_back({{id, -1.0f}});
  for (bool skip : {true, false}) {
    OpenAiLogprobs lp(/*chat=*/false, &tok, skip);
    lp.Add(TokensEvent(ids, logprobs));
    const json out = lp.Take();
    const json& offsets = out["text_offset"];
    ASSERT_EQ(offsets.size(), ids.size()) << out;
    const int64_t marker = skip ? 0 : static_cast<int64_t>(tok.TokenBytes(special).size());
    EXPECT_EQ(offsets[0], 0);
    EXPECT_EQ(offsets[1], marker);
    // The encoding is the dummy-prefix space, then "é" as two byte tokens: one character,
    // which both tokens start at.
    ASSERT_EQ(e_acute->size(), 3u);
    EXPECT_EQ(offsets[2], marker + 1);
    EXPECT_EQ(offsets[3], marker + 1);
    EXPECT_EQ(offsets[4], marker + 2) << out;
  }
}

}  // namespace
}  // namespace tandem::server
