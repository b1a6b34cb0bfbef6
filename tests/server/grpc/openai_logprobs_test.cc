// OpenAI's logprobs objects from engine events, without a tokenizer: tokens spelled as vLLM
// spells them, -inf as OpenAI's floor, a stream's parts each holding only their own tokens, and a
// completion's offsets running on across them.
#include "server/openai/openai_logprobs.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace tandem::server
