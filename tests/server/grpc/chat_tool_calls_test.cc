// Tool calls in gRPC's Chat (server/grpc/chat_tool_calls.h): the request's tool_choice read and
// refused by field; the answer's calls moved out of the streamed text, whichever way the text is
// cut into chunks; and, through a real server, a forced call streamed as Chunk.tool_calls and
// ended with TOOL_CALLS, while "auto" and NONE leave the answer text.
#include "server/grpc/chat_tool_calls.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/sampler.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/grpc/chat_answer.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;
using testing::Client;
using testing::StreamResult;

constexpr char kWeatherTools[] = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
    "days": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}])";

// `tools` (JSON text) as ChatRequest.tools.
void SetTools(const std::string& tools, v1::ChatRequest* request) {
  for (const json& tool : json::parse(tools)) {
    google::protobuf::Struct* out = request->add_tools();
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(tool.dump(), out).ok()) << tool;
  }
}

v1::ChatRequest WeatherChat(int max_new_tokens) {
  v1::ChatRequest request;
  v1::ChatMessage* user = request.add_messages();
  user->set_role("user");
  user->set_content("What is the weather in Oslo?");
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(max_new_tokens);
  SetTools(kWeatherTools, &request);
  return request;
}

absl::Status ReadError(const v1::ChatRequest& request,
                       ToolCallFormat format = ToolCallFormat::kHermes) {
  return ReadChatToolUse(request, format, 1 << 20).status();
}

TEST(ChatToolUseTest, TheChoiceDecidesWhatIsParsedAndForced) {
  v1::ChatRequest request = WeatherChat(8);
  absl::StatusOr<ToolUse> automatic = ReadChatToolUse(request, ToolCallFormat::kHermes, 1 << 20);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_TRUE(automatic->parse);
  EXPECT_FALSE(automatic->forced);
  ASSERT_EQ(automatic->tools.size(), 2u);
  EXPECT_EQ(automatic->tools[0]["function"]["name"], "get_weather");
  // Struct numbers come back as integers where they are whole.
  EXPECT_EQ(automatic->tools[0]["function"]["parameters"]["properties"]["days"]["enum"].dump(),
            "[1,2,3]");

  request.mutable_tool_choice()->set_mode(v1::ToolChoice::NONE);
  absl::StatusOr<ToolUse> none = ReadChatToolUse(request, ToolCallFormat::kHermes, 1 << 20);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->parse);

  request.mutable_tool_choice()->set_mode(v1::ToolChoice::REQUIRED);
  request.set_parallel_tool_calls(false);
  absl::StatusOr<ToolUse> required = ReadChatToolUse(request, ToolCallFormat::kHermes, 1 << 20);
  ASSERT_TRUE(required.ok());
  EXPECT_TRUE(required->forced);
  EXPECT_FALSE(required->parallel);
  EXPECT_EQ(required->only, "");

  request.mutable_tool_choice()->set_function("now");
  absl::StatusOr<ToolUse> named = ReadChatToolUse(request, ToolCallFormat::kJamba, 1 << 20);
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->forced);
  EXPECT_EQ(named->only, "now");

  // Tools without a known format: "auto" leaves the answer text.
  request.clear_tool_choice();
  absl::StatusOr<ToolUse> unknown = ReadChatToolUse(request, ToolCallFormat::kNone, 1 << 20);
  ASSERT_TRUE(unknown.ok());
  EXPECT_FALSE(unknown->parse);
}

TEST(ChatToolUseTest, ChoicesThatCannotBeMetAreRefusedByField) {
  v1::ChatRequest request = WeatherChat(8);
  request.mutable_tool_choice()->set_function("get_time");
  EXPECT_EQ(ReadError(request).message(),
            "tool_choice.function: 'get_time' is not one of the request's tools");
  request.mutable_tool_choice()->set_function("");
  EXPECT_EQ(ReadError(request).message(), "tool_choice.function: required");
  request.mutable_tool_choice()->set_function("get\xC3");
  EXPECT_EQ(ReadError(request).message(), "tool_choice.function: not valid UTF-8");
  // A mode added after this server (proto2 keeps the unknown value as an unknown field).
  v1::ChatRequest newer = WeatherChat(8);
  newer.mutable_tool_choice()->mutable_unknown_fields()->AddVarint(1, 7);
  EXPECT_EQ(ReadError(newer).message(),
            "tool_choice: holds a field or mode value this server does not know");

  request.mutable_tool_choice()->set_mode(v1::ToolChoice::REQUIRED);
  EXPECT_TRUE(
      absl::StrContains(ReadError(request, ToolCallFormat::kNone).message(), "--tool-call-format"));
  request.mutable_sampling()->set_json_object(true);
  EXPECT_EQ(ReadError(request).message(),
            "sampling.json_object: cannot be combined with a tool_choice that forces tool calls");
  request.mutable_sampling()->set_json_schema(R"({"type": "object"})");
  EXPECT_TRUE(absl::StartsWith(ReadError(request).message(), "sampling.json_schema: "));

  v1::ChatRequest no_tools = WeatherChat(8);
  no_tools.clear_tools();
  no_tools.mutable_tool_choice()->set_mode(v1::ToolChoice::REQUIRED);
  EXPECT_EQ(ReadError(no_tools).message(), "tool_choice: needs tools to choose from");
  no_tools.mutable_tool_choice()->set_mode(v1::ToolChoice::AUTO);
  EXPECT_TRUE(ReadError(no_tools).ok());

  // The tools' text counts against the request's cap, as the template's variables do.
  v1::ChatRequest big = WeatherChat(8);
  EXPECT_TRUE(absl::StartsWith(ReadChatToolUse(big, ToolCallFormat::kHermes, 40).status().message(),
                               "tools[0]"));
}

constexpr char kHermesAnswer[] =
    "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";

struct Answer {
  std::string text;
  std::vector<v1::ToolCall> calls;
  v1::Complete complete;
};

// kHermesAnswer streamed in pieces of `piece` bytes, the last `held` bytes held back until the
// end (as a partial stop string would be), and finished with `reason`.
Answer Stream(size_t piece, size_t held, v1::FinishReason reason) {
  const std::string answer = kHermesAnswer;
  ChatAnswer calls(std::nullopt, ToolCallFormat::kHermes, json::parse(kWeatherTools));
  Answer out;
  const size_t streamed = answer.size() - held;
  for (size_t at = 0; at < streamed; at += piece) {
    v1::Chunk chunk;
    calls.AddText(std::string_view(answer).substr(at, std::min(piece, streamed - at)), &chunk);
    out.text += chunk.text();
    out.calls.insert(out.calls.end(), chunk.tool_calls().begin(), chunk.tool_calls().end());
  }
  out.complete.set_finish_reason(reason);
  out.complete.set_text(answer.substr(streamed));
  calls.Finish(&out.complete);
  out.text += out.complete.text();
  out.calls.insert(out.calls.end(), out.complete.tool_calls().begin(),
                   out.complete.tool_calls().end());
  return out;
}

TEST(ChatToolCallsTest, CallsLeaveTheTextWhereverTheChunksAreCut) {
  for (size_t piece : {size_t{1}, size_t{3}, size_t{17}, sizeof(kHermesAnswer)}) {
    for (size_t held : {size_t{0}, size_t{5}, size_t{40}}) {
      SCOPED_TRACE(::testing::Message() << "piece " << piece << ", held " << held);
      Answer answer = Stream(piece, held, v1::STOP);
      EXPECT_EQ(answer.text, "Let me look.\n");
      ASSERT_EQ(answer.calls.size(), 2u);
      EXPECT_EQ(answer.calls[0].name(), "get_weather");
      EXPECT_EQ(json::parse(answer.calls[0].arguments()), json({{"city", "Oslo"}}));
      EXPECT_EQ(answer.calls[1].name(), "now");
      EXPECT_EQ(json::parse(answer.calls[1].arguments()), json::object());
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(answer.calls[i].index(), i);
        EXPECT_TRUE(absl::StartsWith(answer.calls[i].id(), "call_"));
      }
      EXPECT_NE(answer.calls[0].id(), answer.calls[1].id());
      EXPECT_EQ(answer.complete.finish_reason(), v1::TOOL_CALLS);
    }
  }
  // Cut off by the length limit: the reason stays, and a held-back call still counts.
  Answer cut = Stream(4, 40, v1::LENGTH);
  EXPECT_EQ(cut.complete.finish_reason(), v1::LENGTH);
  EXPECT_EQ(cut.complete.tool_calls_size(), 1);
  EXPECT_EQ(cut.calls.size(), 2u);
}

TEST(ChatToolCallsTest, AnAnswerWithoutCallsIsItsText) {
  ChatAnswer calls(std::nullopt, ToolCallFormat::kHermes, json::parse(kWeatherTools));
  v1::Chunk chunk;
  calls.AddText("It is sunny <tool", &chunk);
  v1::Complete complete;
  complete.set_finish_reason(v1::STOP);
  complete.set_text("s> today.");
  calls.Finish(&complete);
  EXPECT_EQ(chunk.text() + complete.text(), "It is sunny <tools> today.");
  EXPECT_EQ(chunk.tool_calls_size() + complete.tool_calls_size(), 0);
  EXPECT_EQ(complete.finish_reason(), v1::STOP);
}

// A real server whose model writes Hermes calls (the fixture was never taught tools, so only a
// forced choice gets calls out of it).
class ChatToolCallsServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = testing::LoadServedFixture().release();
    ASSERT_NE(model_, nullptr);
    ServerConfig config = testing::SmallServerConfig();
    config.tool_call_format = ToolCallFormat::kHermes;
    auto server = GrpcServer::Start(*model_, config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete model_;
    model_ = nullptr;
  }

  static ServedModel* model_;
  static GrpcServer* server_;
};

ServedModel* ChatToolCallsServerTest::model_ = nullptr;
GrpcServer* ChatToolCallsServerTest::server_ = nullptr;

TEST_F(ChatToolCallsServerTest, AForcedCallStreamsAsToolCalls) {
  Client client(server_->port());
  v1::ChatRequest request = WeatherChat(200);
  request.mutable_tool_choice()->set_function("get_weather");
  request.set_parallel_tool_calls(false);
  StreamResult named = client.Chat(request);
  ASSERT_TRUE(named.status.ok()) << named.status.error_message();
  EXPECT_EQ(named.complete.finish_reason(), v1::TOOL_CALLS);
  EXPECT_EQ(named.text, "");
  EXPECT_FALSE(named.tokens.empty());
  ASSERT_EQ(named.tool_calls.size(), 1u);
  const v1::ToolCall& call = named.tool_calls[0];
  EXPECT_EQ(call.name(), "get_weather");
  EXPECT_EQ(call.index(), 0);
  EXPECT_TRUE(absl::StartsWith(call.id(), "call_"));
  const json arguments = json::parse(call.arguments());
  ASSERT_TRUE(arguments.is_object()) << call.arguments();
  ASSERT_TRUE(arguments.contains("city")) << call.arguments();
  EXPECT_TRUE(arguments["city"].is_string());
  EXPECT_LE(arguments["city"].get<std::string>().size(), 12u);
  if (arguments.contains("days")) {
    EXPECT_TRUE(arguments["days"].is_number_integer());
  }

  // "required": a call of any of the tools.
  request.mutable_tool_choice()->set_mode(v1::ToolChoice::REQUIRED);
  StreamResult required = client.Chat(request);
  ASSERT_TRUE(required.status.ok()) << required.status.error_message();
  ASSERT_EQ(required.tool_calls.size(), 1u);
  const std::string name = required.tool_calls[0].name();
  EXPECT_TRUE(name == "get_weather" || name == "now") << name;
  EXPECT_EQ(required.complete.finish_reason(), v1::TOOL_CALLS);

  // NONE: nothing is parsed; the model answers in its own words.
  request.mutable_tool_choice()->set_mode(v1::ToolChoice::NONE);
  request.mutable_sampling()->set_max_new_tokens(8);
  StreamResult none = client.Chat(request);
  ASSERT_TRUE(none.status.ok()) << none.status.error_message();
  EXPECT_TRUE(none.tool_calls.empty());
  EXPECT_NE(none.complete.finish_reason(), v1::TOOL_CALLS);

  // AUTO parses, and finds no call in the fixture's text: the same text as NONE.
  request.mutable_tool_choice()->set_mode(v1::ToolChoice::AUTO);
  StreamResult automatic = client.Chat(request);
  ASSERT_TRUE(automatic.status.ok()) << automatic.status.error_message();
  EXPECT_TRUE(automatic.tool_calls.empty());
  EXPECT_EQ(automatic.tokens, none.tokens);
  EXPECT_EQ(automatic.text, none.text);
}

// Each choice of n parses its own answer: its calls are those of a lone Chat with its seed.
TEST_F(ChatToolCallsServerTest, EachChoiceParsesItsOwnCalls) {
  Client client(server_->port());
  v1::ChatRequest request = WeatherChat(200);
  request.mutable_tool_choice()->set_mode(v1::ToolChoice::REQUIRED);
  request.mutable_sampling()->set_temperature(1.0f);
  request.mutable_sampling()->set_seed(3);
  request.mutable_sampling()->set_n(3);
  grpc::ClientContext context;
  auto reader = client.stub().Chat(&context, request);
  const testing::ChoicesResult got = testing::ReadChoices(*reader, 3);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  for (int32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const StreamResult& choice = got.choices[i];
    EXPECT_EQ(choice.complete.finish_reason(), v1::TOOL_CALLS);
    ASSERT_FALSE(choice.tool_calls.empty());
    v1::ChatRequest lone = request;
    lone.mutable_sampling()->set_n(1);
    lone.mutable_sampling()->set_seed(engine::ChoiceSeed(3, i));
    const StreamResult alone = client.Chat(lone);
    ASSERT_TRUE(alone.status.ok()) << alone.status.error_message();
    EXPECT_EQ(choice.tokens, alone.tokens);
    EXPECT_EQ(choice.text, alone.text);
    ASSERT_EQ(choice.tool_calls.size(), alone.tool_calls.size());
    for (size_t c = 0; c < choice.tool_calls.size(); ++c) {
      EXPECT_EQ(choice.tool_calls[c].index(), static_cast<int32_t>(c));  // from 0 in each choice
      EXPECT_EQ(choice.tool_calls[c].name(), alone.tool_calls[c].name());
      EXPECT_EQ(choice.tool_calls[c].arguments(), alone.tool_calls[c].arguments());
    }
  }
}

TEST_F(ChatToolCallsServerTest, RefusalsNameTheFieldAndTheFormatIsReported) {
  Client client(server_->port());
  v1::ChatRequest request = WeatherChat(8);
  request.mutable_tool_choice()->set_function("get_time");
  StreamResult refused = client.Chat(request);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.status.error_message(),
            "tool_choice.function: 'get_time' is not one of the request's tools");

  // A schema structured output cannot enforce names the tool.
  v1::ChatRequest dated = WeatherChat(8);
  dated.clear_tools();
  SetTools(R"([{"type": "function", "function": {"name": "book", "parameters": {"type": "object",
      "properties": {"day": {"type": "integer", "multipleOf": 7}}}}}])",
           &dated);
  dated.mutable_tool_choice()->set_mode(v1::ToolChoice::REQUIRED);
  StreamResult unenforceable = client.Chat(dated);
  EXPECT_EQ(unenforceable.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(
      absl::StartsWith(unenforceable.status.error_message(), "tools[0].function.parameters"))
      << unenforceable.status.error_message();

  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(client.stub().GetModelInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.tool_call_format(), "hermes");
}

}  // namespace
}  // namespace tandem::server
