// Reasoning split off answers through real servers (server/reasoning, server/grpc/chat_answer.h,
// the OpenAI API): over a copy of the fixture model whose chat template opens a <think> block at
// the end of the prompt (as reasoning models' templates do), the format is detected, gRPC Chat
// streams the block as Chunk.reasoning and the OpenAI API as reasoning_content, whole and
// streamed, each what the split of the same answer from a server without the format gives; an
// empty block in the prompt, and a grammar, leave the answer whole; past turns' reasoning reaches
// the template.
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/openai/openai_endpoint.h"
#include "server/reasoning/reasoning_stream.h"
#include "tests/server/grpc/grpc_test_util.h"
#include "tests/server/grpc/openai_test_events.h"
#include "tests/server/http_test_client.h"
#include "tests/server/thinking_model.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;
using testing::Client;
using testing::Parse;
using testing::SseEvents;
using testing::StreamResult;

constexpr char kModel[] = "zamba2-tiny";

v1::ChatRequest AskChat(const std::string& content, int max_tokens) {
  v1::ChatRequest request;
  v1::ChatMessage* user = request.add_messages();
  user->set_role("user");
  user->set_content(content);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(max_tokens);
  request.mutable_sampling()->set_ignore_eos(true);  // the fixture's EOS must not end it early
  return request;
}

json AskBody(const std::string& content, int max_tokens) {
  return {{"model", kModel},
          {"messages", {{{"role", "user"}, {"content", content}}}},
          {"temperature", 0},
          {"max_tokens", max_tokens},
          {"ignore_eos", true}};
}

class ReasoningAnswerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    files_ = new ::tandem::testing::ThinkingModel(::testing::TempDir());
    absl::StatusOr<ServedModel> served =
        ServedModel::Load(files_->dir(), testing::FixtureLoadOptions());
    ASSERT_TRUE(served.ok()) << served.status();
    model_ = new ServedModel(*std::move(served));
    ServerConfig config = testing::SmallServerConfig();
    auto thinking = GrpcServer::Start(*model_, config);  // the format the template shows
    ASSERT_TRUE(thinking.ok()) << thinking.status();
    thinking_ = thinking->release();
    config.reasoning_format = ReasoningFormat::kNone;
    auto plain = GrpcServer::Start(*model_, config);
    ASSERT_TRUE(plain.ok()) << plain.status();
    plain_ = plain->release();
    OpenAiEndpointOptions options;
    options.model_name = kModel;
    auto endpoint = OpenAiEndpoint::Start(thinking_->state(), options);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = endpoint->release();
    auto plain_endpoint = OpenAiEndpoint::Start(plain_->state(), options);
    ASSERT_TRUE(plain_endpoint.ok()) << plain_endpoint.status();
    plain_endpoint_ = plain_endpoint->release();
  }
  static void TearDownTestSuite() {
    delete plain_endpoint_;
    delete endpoint_;
    delete plain_;
    delete thinking_;
    delete model_;
    delete files_;
  }

  // The same chat on both servers; `opened` is what the prompt does with the block.
  void ExpectSplitOfThePlainAnswer(const v1::ChatRequest& request, bool opened) {
    StreamResult split = Client(thinking_->port()).Chat(request);
    StreamResult whole = Client(plain_->port()).Chat(request);
    ASSERT_TRUE(split.status.ok()) << split.status.error_message();
    ASSERT_TRUE(whole.status.ok()) << whole.status.error_message();
    EXPECT_EQ(split.tokens, whole.tokens);
    EXPECT_EQ(whole.reasoning, "");
    const ReasoningPiece expected = SplitReasoning(ReasoningFormat::kThink, opened, whole.text);
    EXPECT_EQ(split.reasoning, expected.reasoning);
    EXPECT_EQ(split.text, expected.content);
  }

  static ::tandem::testing::ThinkingModel* files_;
  static ServedModel* model_;
  static GrpcServer* thinking_;
  static GrpcServer* plain_;
  static OpenAiEndpoint* endpoint_;
  static OpenAiEndpoint* plain_endpoint_;
};

::tandem::testing::ThinkingModel* ReasoningAnswerTest::files_ = nullptr;
ServedModel* ReasoningAnswerTest::model_ = nullptr;
GrpcServer* ReasoningAnswerTest::thinking_ = nullptr;
GrpcServer* ReasoningAnswerTest::plain_ = nullptr;
OpenAiEndpoint* ReasoningAnswerTest::endpoint_ = nullptr;
OpenAiEndpoint* ReasoningAnswerTest::plain_endpoint_ = nullptr;

TEST_F(ReasoningAnswerTest, TheTemplatesFormatIsDetectedAndReported) {
  for (auto [server, format] : {std::pair{thinking_, "think"}, std::pair{plain_, "none"}}) {
    grpc::ClientContext context;
    v1::ModelInfo info;
    ASSERT_TRUE(Client(server->port()).stub().GetModelInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.reasoning_format(), format);
  }
}

TEST_F(ReasoningAnswerTest, AnOpenedBlockStreamsAsReasoning) {
  const v1::ChatRequest request = AskChat("Why is the sky blue?", 12);
  ExpectSplitOfThePlainAnswer(request, /*opened=*/true);
  // The fixture's 12 tokens hold no end marker: all reasoning, no answer yet.
  StreamResult split = Client(thinking_->port()).Chat(request);
  EXPECT_FALSE(split.reasoning.empty());
  EXPECT_EQ(split.text, "");
  EXPECT_EQ(split.complete.finish_reason(), v1::LENGTH);
}

TEST_F(ReasoningAnswerTest, AnEmptyBlockInThePromptLeavesTheAnswer) {
  v1::ChatRequest request = AskChat("Why is the sky blue?", 12);
  google::protobuf::Value off;
  off.set_bool_value(false);
  (*request.mutable_chat_template_kwargs()->mutable_fields())["enable_thinking"] = off;
  ExpectSplitOfThePlainAnswer(request, /*opened=*/false);
  StreamResult split = Client(thinking_->port()).Chat(request);
  EXPECT_FALSE(split.text.empty());
}

TEST_F(ReasoningAnswerTest, AGrammarKeepsTheAnswerWhole) {
  v1::ChatRequest request = AskChat("Answer in JSON.", 12);
  request.mutable_sampling()->set_json_object(true);
  StreamResult split = Client(thinking_->port()).Chat(request);
  StreamResult whole = Client(plain_->port()).Chat(request);
  ASSERT_TRUE(split.status.ok()) << split.status.error_message();
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.text, whole.text);
  const size_t first = split.text.find_first_not_of(" \t\n\r");
  ASSERT_NE(first, std::string::npos) << split.text;
  EXPECT_EQ(split.text[first], '{');
}

TEST_F(ReasoningAnswerTest, PastReasoningReachesTheTemplate) {
  auto prompt_tokens = [&](bool with_reasoning) {
    v1::ChatRequest request = AskChat("And the sunset?", 1);
    v1::ChatMessage first = request.messages(0);
    first.set_content("Why is the sky blue?");
    v1::ChatMessage answer;
    answer.set_role("assistant");
    answer.set_content("Scattering.");
    if (with_reasoning) answer.set_reasoning_content("Rayleigh scattering favours blue.");
    request.clear_messages();
    *request.add_messages() = first;
    *request.add_messages() = answer;
    v1::ChatMessage* next = request.add_messages();
    next->set_role("user");
    next->set_content("And the sunset?");
    StreamResult result = Client(thinking_->port()).Chat(request);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message();
    return result.complete.usage().prompt_tokens();
  };
  EXPECT_GT(prompt_tokens(true), prompt_tokens(false) + 5);
}

TEST_F(ReasoningAnswerTest, TheOpenAiApiReturnsReasoningContentWholeAndStreamed) {
  StreamResult grpc = Client(thinking_->port()).Chat(AskChat("Why is the sky blue?", 12));
  ASSERT_TRUE(grpc.status.ok());

  testing::HttpResponse whole = testing::HttpPost(endpoint_->port(), "/v1/chat/completions",
                                                  AskBody("Why is the sky blue?", 12).dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json message = Parse(whole.body)["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], grpc.reasoning);
  EXPECT_EQ(message["content"], grpc.text);

  json body = AskBody("Why is the sky blue?", 12);
  body["stream"] = true;
  testing::HttpResponse streamed =
      testing::HttpPost(endpoint_->port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::string reasoning, content;
  int reasoning_chunks = 0;
  bool done = false;
  for (const json& event : SseEvents(streamed.body, &done)) {
    const json& delta = event["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      reasoning += delta["reasoning_content"].get<std::string>();
      ++reasoning_chunks;
    }
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(reasoning, grpc.reasoning);
  EXPECT_EQ(content, grpc.text);
  EXPECT_GT(reasoning_chunks, 1);  // streamed as it came, not whole at the end

  // Without the format the message has no reasoning_content; a past answer's is accepted.
  json again = AskBody("And the sunset?", 4);
  again["messages"] = {{{"role", "user"}, {"content", "Why is the sky blue?"}},
                       {{"role", "assistant"},
                        {"content", "Scattering."},
                        {"reasoning_content", "Rayleigh scattering."}},
                       {{"role", "user"}, {"content", "And the sunset?"}}};
  testing::HttpResponse plain =
      testing::HttpPost(plain_endpoint_->port(), "/v1/chat/completions", again.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_FALSE(Parse(plain.body)["choices"][0]["message"].contains("reasoning_content"));
}

// usage.reasoning_tokens (engine/reasoning_tokens.h) is counted on token ids: this fixture spells
// "<think>" and "</think>" in several tokens, so the thinking server leaves the count out rather
// than guess it; a server without a format reports 0.
TEST_F(ReasoningAnswerTest, ReasoningTokensAreReportedWhereTheyCanBeCounted) {
  const v1::ChatRequest request = AskChat("Why is the sky blue?", 6);
  StreamResult uncounted = Client(thinking_->port()).Chat(request);
  StreamResult plain = Client(plain_->port()).Chat(request);
  ASSERT_TRUE(uncounted.status.ok()) << uncounted.status.error_message();
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  EXPECT_FALSE(uncounted.reasoning.empty());
  EXPECT_FALSE(uncounted.complete.usage().has_reasoning_tokens());
  ASSERT_TRUE(plain.complete.usage().has_reasoning_tokens());
  EXPECT_EQ(plain.complete.usage().reasoning_tokens(), 0);

  const std::string body = AskBody("Why is the sky blue?", 6).dump();
  const testing::HttpResponse thinking_answer =
      testing::HttpPost(endpoint_->port(), "/v1/chat/completions", body);
  const testing::HttpResponse plain_answer =
      testing::HttpPost(plain_endpoint_->port(), "/v1/chat/completions", body);
  ASSERT_EQ(thinking_answer.status, 200) << thinking_answer.body;
  ASSERT_EQ(plain_answer.status, 200) << plain_answer.body;
  const json thinking_details = Parse(thinking_answer.body)["usage"]["completion_tokens_details"];
  const json plain_details = Parse(plain_answer.body)["usage"]["completion_tokens_details"];
  EXPECT_FALSE(thinking_details.contains("reasoning_tokens")) << thinking_details;
  EXPECT_EQ(plain_details["reasoning_tokens"], 0) << plain_details;
}

}  // namespace
}  // namespace tandem::server
