// BuildChatVariables: what the chat template sees for a ChatRequest, and how bad input is
// refused (each error names the field).
#include "server/grpc/chat_variables.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace tandem::server {
namespace {

using json = nlohmann::ordered_json;
using ::testing::HasSubstr;

// A ChatRequest from its JSON form, as grpcurl or a Python client sends it.
v1::ChatRequest Request(const std::string& text) {
  v1::ChatRequest r;
  auto status = google::protobuf::util::JsonStringToMessage(text, &r);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return r;
}

models::TokenizerConfig Tokens() {
  models::TokenizerConfig c;
  c.bos_token = "<s>";
  c.eos_token = "</s>";
  c.unk_token = "<unk>";
  return c;
}

absl::Status Error(const v1::ChatRequest& r, int64_t max_bytes = 1 << 20) {
  return BuildChatVariables(r, Tokens(), max_bytes).status();
}

TEST(ChatVariablesTest, PassesWhatTransformersPasses) {
  auto v = BuildChatVariables(Request(R"({
      "messages": [
        {"role": "user", "content": "Weather?", "name": "ann"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}],
         "reasoning_content": "Paris is likely."},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
      "tools": [{"type": "function", "function": {"name": "get_weather",
                 "parameters": {"type": "object", "required": ["city"], "properties": {}}}}],
      "chat_template_kwargs": {"enable_thinking": false, "ratio": 0.5, "depth": 3},
      "add_generation_prompt": false})"),
                              Tokens(), 1 << 20);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->trusted, json({{"add_generation_prompt", false},
                              {"bos_token", "<s>"},
                              {"eos_token", "</s>"},
                              {"unk_token", "<unk>"}}));
  const json& m = v->untrusted["messages"];
  EXPECT_EQ(m[0], json({{"role", "user"}, {"content", "Weather?"}, {"name", "ann"}}));
  // Content absent beside tool calls is null, as OpenAI clients send it.
  EXPECT_TRUE(m[1]["content"].is_null());
  // Integral numbers are integers (tojson prints 2, not 2.0); keys come sorted.
  EXPECT_EQ(m[1]["tool_calls"][0].dump(),
            R"({"function":{"arguments":{"city":"Paris","days":2},"name":"get_weather"},)"
            R"("id":"c1","type":"function"})");
  EXPECT_EQ(m[1]["reasoning_content"], "Paris is likely.");
  EXPECT_EQ(m[2], json({{"role", "tool"}, {"content", "sunny"}, {"tool_call_id", "c1"}}));
  EXPECT_EQ(v->untrusted["tools"][0]["function"]["parameters"]["required"], json({"city"}));
  EXPECT_TRUE(v->untrusted["documents"].is_null());  // defined, None: transformers' behaviour
  EXPECT_EQ(v->untrusted["enable_thinking"], json(false));
  EXPECT_EQ(v->untrusted["ratio"], json(0.5));
  EXPECT_TRUE(v->untrusted["depth"].is_number_integer());
}

TEST(ChatVariablesTest, DocumentsAndEmptyContent) {
  auto v = BuildChatVariables(Request(R"({"messages": [{"role": "user"}],
      "documents": [{"title": "T", "text": "body", "id": 7}]})"),
                              Tokens(), 1 << 20);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->untrusted["messages"][0]["content"], json(""));
  EXPECT_TRUE(v->untrusted["tools"].is_null());
  EXPECT_EQ(v->untrusted["documents"][0].dump(), R"({"id":7,"text":"body","title":"T"})");
}

TEST(ChatVariablesTest, BadInputNamesTheField) {
  struct Case {
    std::string request;
    std::string field;
  };
  const std::vector<Case> cases = {
      {R"({"messages": []})", "messages: at least one"},
      {R"({"messages": [{"role": "wizard"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}], "chat_template_kwargs": {"bos_token": "x"}})",
       "chat_template_kwargs.bos_token: names a variable the server sets"},
      {R"({"messages": [{"role": "user"}], "chat_template_kwargs": {"messages": []}})",
       "chat_template_kwargs.messages"},
      {R"({"messages": [{"role": "user"}], "chat_template_kwargs": {"add_generation_prompt": 1}})",
       "chat_template_kwargs.add_generation_prompt"},
      {R"({"messages": [{"role": "user"}], "tools": [{"a b": {"c": [1, {"d": [[[[]]]]}]}}]})",
       ""},  // fine: nothing wrong
  };
  for (const Case& c : cases) {
    absl::Status s = Error(Request(c.request));
    if (c.field.empty()) {
      EXPECT_TRUE(s.ok()) << c.request << ": " << s;
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.request;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.field)) << c.request;
  }
}

TEST(ChatVariablesTest, Utf8SizeDepthAndNumbersAreChecked) {
  v1::ChatRequest r = Request(R"({"messages": [{"role": "user", "content": "hi"}]})");
  google::protobuf::Value& f = (*r.add_tools()->mutable_fields())["f"];
  (*f.mutable_struct_value()->mutable_fields())["bad text"].set_string_value("\xC0\xAF");
  EXPECT_THAT(std::string(Error(r).message()),
              HasSubstr("tools[0].f[\"bad text\"]: not valid UTF-8"));

  r = Request(R"({"messages": [{"role": "user", "content": "hi"}]})");
  r.mutable_messages(0)->set_name("\xFF");
  EXPECT_THAT(std::string(Error(r).message()), HasSubstr("messages[0].name: not valid UTF-8"));

  r = Request(R"({"messages": [{"role": "user", "content": "0123456789"}],
      "documents": [{"text": "0123456789"}]})");
  EXPECT_TRUE(Error(r, 40).ok());
  EXPECT_THAT(std::string(Error(r, 20).message()),
              HasSubstr("documents[0].text: the request's text reaches 24 bytes"));

  r = Request(R"({"messages": [{"role": "user"}]})");
  google::protobuf::Struct* s = r.add_documents();
  for (int i = 0; i < kMaxChatJsonDepth + 2; ++i) {
    s = (*s->mutable_fields())["x"].mutable_struct_value();
  }
  EXPECT_THAT(std::string(Error(r).message()), HasSubstr("nested deeper than 32 levels"));

  r = Request(R"({"messages": [{"role": "user"}]})");
  (*r.mutable_chat_template_kwargs()->mutable_fields())["t"].set_number_value(std::nan(""));
  EXPECT_THAT(std::string(Error(r).message()),
              HasSubstr("chat_template_kwargs.t: not a finite number"));
}

}  // namespace
}  // namespace tandem::server
