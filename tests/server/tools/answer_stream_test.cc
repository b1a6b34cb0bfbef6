// A chat answer read for its reasoning, then its calls (server/tools/answer_stream.h): calls in
// the reasoning are not made, those in the answer are; any cutting of the stream gives the whole
// parse; with both parts off the answer is the text.
#include "server/tools/answer_stream.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::server {
namespace {

constexpr char kAnswer[] =
    "<think>\nMaybe <tool_call>\n{\"name\": \"now\"}\n</tool_call> first?\n</think>\n\n"
    "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
    "</tool_call>";

AnswerStream BothParts() {
  return AnswerStream(ReasoningStream(ReasoningFormat::kThink, /*opened=*/false),
                      ToolCallStream(ToolCallFormat::kHermes, nlohmann::json()));
}

TEST(AnswerStreamTest, CallsAreReadFromTheAnswerNotTheReasoning) {
  bool reasoned = false;
  const AnswerPiece whole = ParseAnswer(BothParts(), kAnswer, &reasoned);
  EXPECT_TRUE(reasoned);
  EXPECT_EQ(whole.reasoning, "\nMaybe <tool_call>\n{\"name\": \"now\"}\n</tool_call> first?\n");
  EXPECT_EQ(whole.content, "Checking.\n");  // what precedes the first call is kept
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].name, "get_weather");
  EXPECT_EQ(whole.calls[0].arguments, "{\"city\":\"Oslo\"}");
}

TEST(AnswerStreamTest, AnyCuttingGivesTheWholeParseInOrder) {
  const std::string answer = kAnswer;
  const AnswerPiece whole = ParseAnswer(BothParts(), answer, nullptr);
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, size_t{30}, answer.size()}) {
    SCOPED_TRACE(::testing::Message() << "pieces of " << piece);
    AnswerStream stream = BothParts();
    std::vector<AnswerPiece> pieces;
    for (size_t at = 0; at < answer.size(); at += piece) {
      for (AnswerPiece& p : stream.Feed(std::string_view(answer).substr(at, piece))) {
        pieces.push_back(std::move(p));
      }
    }
    for (AnswerPiece& p : stream.Finish()) pieces.push_back(std::move(p));
    AnswerPiece joined;
    bool answer_started = false;
    for (const AnswerPiece& p : pieces) {
      // All reasoning comes before any answer.
      if (!p.content.empty() || !p.calls.empty()) answer_started = true;
      if (answer_started) {
        EXPECT_EQ(p.reasoning, "");
      }
      joined.reasoning += p.reasoning;
      joined.content += p.content;
      for (const ToolCall& call : p.calls) joined.calls.push_back(call);
      // No piece is empty.
      EXPECT_FALSE(p.reasoning.empty() && p.content.empty() && p.calls.empty());
    }
    EXPECT_EQ(joined.reasoning, whole.reasoning);
    EXPECT_EQ(joined.content, whole.content);
    ASSERT_EQ(joined.calls.size(), whole.calls.size());
    EXPECT_EQ(joined.calls[0].arguments, whole.calls[0].arguments);
  }
}

TEST(AnswerStreamTest, EachPartAloneOrNeither) {
  bool reasoned = true;
  AnswerPiece text = ParseAnswer(AnswerStream(std::nullopt, std::nullopt), kAnswer, &reasoned);
  EXPECT_FALSE(reasoned);
  EXPECT_EQ(text.content, kAnswer);
  EXPECT_EQ(text.reasoning, "");
  EXPECT_TRUE(text.calls.empty());

  // Calls alone: the reasoning's call is made too, its text is content.
  AnswerPiece calls = ParseAnswer(
      AnswerStream(std::nullopt, ToolCallStream(ToolCallFormat::kHermes, nlohmann::json())),
      kAnswer, nullptr);
  EXPECT_EQ(calls.calls.size(), 2u);
  EXPECT_EQ(calls.reasoning, "");

  // Reasoning alone: the answer keeps its call's text.
  AnswerPiece reasoning =
      ParseAnswer(AnswerStream(ReasoningStream(ReasoningFormat::kThink, false), std::nullopt),
                  kAnswer, &reasoned);
  EXPECT_TRUE(reasoned);
  EXPECT_TRUE(reasoning.calls.empty());
  EXPECT_EQ(reasoning.content.substr(0, 10), "Checking.\n");
  EXPECT_NE(reasoning.content.find("get_weather"), std::string::npos);
}

}  // namespace
}  // namespace tandem::server
