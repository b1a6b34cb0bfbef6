// OpenAI request bodies become the gRPC service's requests field by field (content parts, tools,
// kwargs, stop, max_tokens and its newer spelling, the prompt's forms), parameters tandem does
// not honour are refused by name, and validation's proto field names read as the client's.
#include "server/openai/openai_request.h"

#include <limits>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/openai/openai_error.h"

namespace tandem::server {
namespace {

OpenAiRequestOptions Options() {
  OpenAiRequestOptions options;
  options.model_name = "m";
  options.default_chat_max_tokens = 300;
  return options;
}

absl::StatusOr<OpenAiRequest> Chat(const std::string& body) {
  return ParseChatCompletionRequest(body, Options());
}

absl::StatusOr<OpenAiRequest> Completion(const std::string& body) {
  return ParseCompletionRequest(body, Options());
}

TEST(OpenAiRequestTest, ChatFieldsBecomeTheChatRequest) {
  absl::StatusOr<OpenAiRequest> request = Chat(R"({
      "model": "m", "user": "u-1", "logprobs": false, "n": 1, "top_logprobs": null,
      "messages": [
        {"role": "system",
         "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": null, "refusal": null, "annotations": [],
         "reasoning_content": "f knows.",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42", "name": "f"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "tool_choice": "auto", "chat_template_kwargs": {"enable_thinking": false},
      "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": -1, "seed": 3,
      "stop": ["x", "y"], "presence_penalty": 0.1, "stream": true,
      "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::ChatRequest& chat = request->chat;
  ASSERT_EQ(chat.messages_size(), 3);
  EXPECT_EQ(chat.messages(0).content(), "a\nb");
  EXPECT_FALSE(chat.messages(1).has_content());
  EXPECT_EQ(chat.messages(1).reasoning_content(), "f knows.");
  EXPECT_FALSE(chat.messages(0).has_reasoning_content());
  ASSERT_EQ(chat.messages(1).tool_calls_size(), 1);
  EXPECT_EQ(chat.messages(1).tool_calls(0).fields().at("id").string_value(), "c1");
  EXPECT_EQ(chat.messages(2).tool_call_id(), "c1");
  EXPECT_EQ(chat.messages(2).name(), "f");
  ASSERT_EQ(chat.tools_size(), 1);
  EXPECT_FALSE(chat.chat_template_kwargs().fields().at("enable_thinking").bool_value());
  const v1::SamplingParams& s = chat.sampling();
  EXPECT_EQ(s.max_new_tokens(), 7);
  EXPECT_FLOAT_EQ(s.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.top_k(), 0);
  EXPECT_EQ(s.seed(), 3u);
  ASSERT_EQ(s.stop_strings_size(), 2);
  EXPECT_EQ(s.stop_strings(1), "y");
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.1f);
  EXPECT_TRUE(request->stream);
  EXPECT_TRUE(request->include_usage);
}

TEST(OpenAiRequestTest, DefaultsAreOpenAis) {
  absl::StatusOr<OpenAiRequest> chat =
      Chat(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": "z"})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->chat.sampling().max_new_tokens(), 300);  // the server's limit
  EXPECT_EQ(chat->chat.sampling().stop_strings(0), "z");
  EXPECT_FALSE(chat->stream);
  absl::StatusOr<OpenAiRequest> completion = Completion(R"({"model": "m", "prompt": "hi"})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_EQ(completion->generate.sampling().max_new_tokens(), 16);
  EXPECT_EQ(completion->generate.text(), "hi");
}

TEST(OpenAiRequestTest, PromptsComeAsTextIdsOrAListOfOne) {
  absl::StatusOr<OpenAiRequest> ids = Completion(R"({"model": "m", "prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->generate.token_ids().ids_size(), 3);
  absl::StatusOr<OpenAiRequest> one = Completion(R"({"model": "m", "prompt": ["hello"]})");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->generate.text(), "hello");
  absl::StatusOr<OpenAiRequest> nested = Completion(R"({"model": "m", "prompt": [[4, 5]]})");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(nested->generate.token_ids().ids(1), 5);
}

// A list of prompts (OpenAI's batch): each the same request for its own prompt.
TEST(OpenAiRequestTest, AListOfPromptsIsOneRequestEach) {
  absl::StatusOr<OpenAiRequest> texts = Completion(
      R"({"model": "m", "prompt": ["one", "two", "three"], "max_tokens": 3, "seed": 5})");
  ASSERT_TRUE(texts.ok()) << texts.status();
  EXPECT_EQ(texts->generate.text(), "one");
  ASSERT_EQ(texts->more_prompts.size(), 2u);
  EXPECT_EQ(texts->more_prompts[0].text(), "two");
  EXPECT_EQ(texts->more_prompts[1].text(), "three");
  EXPECT_TRUE(texts->prompt_list);
  // Only the prompt: the rest is the first's (the endpoint copies its built request).
  EXPECT_FALSE(texts->more_prompts[0].has_sampling());
  absl::StatusOr<OpenAiRequest> ids =
      Completion(R"({"model": "m", "prompt": [[1, 2], [3]], "echo": true, "logprobs": 1})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->generate.token_ids().ids_size(), 2);
  ASSERT_EQ(ids->more_prompts.size(), 1u);
  EXPECT_EQ(ids->more_prompts[0].token_ids().ids(0), 3);
  EXPECT_FALSE(ids->more_prompts[0].has_text());
  EXPECT_EQ(ids->generate.sampling().prompt_logprobs(), 1);
  absl::StatusOr<OpenAiRequest> one = Completion(R"({"model": "m", "prompt": ["x"]})");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(one->prompt_list);
  EXPECT_TRUE(one->more_prompts.empty());
  std::string many = R"({"model": "m", "prompt": [)";
  for (int i = 0; i < 257; ++i) many += i == 0 ? R"("x")" : R"(, "x")";
  absl::StatusOr<OpenAiRequest> too_many = Completion(many + "]}");
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().message(), "prompt: a list of 257 prompts; at most 256 per request");
}

TEST(OpenAiRequestTest, NumbersBeyondTheirTypesAreReadWithoutWrapping) {
  // A seed takes the proto's whole uint64 range.
  absl::StatusOr<OpenAiRequest> seed =
      Completion(R"({"model": "m", "prompt": "x", "seed": 18446744073709551615})");
  ASSERT_TRUE(seed.ok()) << seed.status();
  EXPECT_EQ(seed->generate.sampling().seed(), 18446744073709551615u);
  // A huge unsigned token id is no token id (it once wrapped to -1).
  absl::StatusOr<OpenAiRequest> id =
      Completion(R"({"model": "m", "prompt": [1, 18446744073709551615]})");
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("prompt[1]"), absl::string_view::npos) << id.status();
  // A float parameter past float's range reaches the validation as float's largest value.
  absl::StatusOr<OpenAiRequest> hot =
      Completion(R"({"model": "m", "prompt": "x", "temperature": 1e300})");
  ASSERT_TRUE(hot.ok()) << hot.status();
  EXPECT_EQ(hot->generate.sampling().temperature(), std::numeric_limits<float>::max());
  absl::StatusOr<OpenAiRequest> top_k =
      Completion(R"({"model": "m", "prompt": "x", "top_k": 18446744073709551615})");
  ASSERT_TRUE(top_k.ok()) << top_k.status();
  EXPECT_EQ(top_k->generate.sampling().top_k(), std::numeric_limits<int32_t>::max());
}

// response_format becomes the sampling's constraint; a schema keeps its members' order (which is
// the order the model writes the properties in), although the body is otherwise read sorted.
TEST(OpenAiRequestTest, ResponseFormatsBecomeTheSamplingsConstraint) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  absl::StatusOr<OpenAiRequest> object =
      Chat(R"({"model": "m", )" + messages + R"(, "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_TRUE(object->chat.sampling().json_object());
  absl::StatusOr<OpenAiRequest> schema = Chat(
      R"({"model": "m", )" + messages + R"(, "response_format": {"type": "json_schema",
          "json_schema": {"name": "person", "strict": true, "description": "d",
                          "schema": {"type": "object", "properties": {"zeta": {"type": "integer"},
                                     "alpha": {"type": "string"}}}}}})");
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->chat.sampling().json_schema(),
            R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}}})");
  absl::StatusOr<OpenAiRequest> text =
      Chat(R"({"model": "m", )" + messages + R"(, "response_format": {"type": "text"}})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->chat.sampling().response_format_case(), v1::SamplingParams::RESPONSE_FORMAT_NOT_SET);
}

TEST(OpenAiRequestTest, ToolChoiceSaysWhetherCallsAreParsedOrForced) {
  const std::string head = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "b", "parameters": {}}},
                {"type": "function", "function": {"name": "a"}}])";
  OpenAiRequestOptions hermes = Options();
  hermes.tool_call_format = ToolCallFormat::kHermes;
  auto chat = [&](const std::string& rest, const OpenAiRequestOptions& options) {
    return ParseChatCompletionRequest(head + rest + "}", options);
  };
  absl::StatusOr<OpenAiRequest> r = chat("", hermes);  // tools without a choice: auto
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tool_use.parse);
  EXPECT_FALSE(r->tool_use.forced);
  ASSERT_EQ(r->tool_use.tools.size(), 2u);
  EXPECT_EQ(r->tool_use.tools[0]["function"]["name"], "b");  // the client's order
  r = chat(R"(, "tool_choice": "none")", hermes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tool_use.parse);
  r = chat(R"(, "tool_choice": "required", "parallel_tool_calls": false)", hermes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tool_use.forced);
  EXPECT_FALSE(r->tool_use.parallel);
  EXPECT_EQ(r->tool_use.only, "");
  r = chat(R"(, "tool_choice": {"type": "function", "function": {"name": "a"}})", hermes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tool_use.forced);
  EXPECT_EQ(r->tool_use.only, "a");
  // A model without a known format still sees its tools, and answers in text.
  r = chat("", Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tool_use.parse);
  EXPECT_EQ(r->chat.tools_size(), 2);
  for (const auto& [rest, says] : std::vector<std::pair<std::string, std::string>>{
           {R"(, "tool_choice": "any")", "tool_choice: must be \"none\", \"auto\""},
           {R"(, "tool_choice": {"type": "function"})", "tool_choice.function: required"},
           {R"(, "tool_choice": {"type": "function", "function": {"name": "a", "x": 1}})",
            "tool_choice.function.x: unknown"},
           {R"(, "tool_choice": "required", "response_format": {"type": "json_object"})",
            "response_format: cannot be combined"},
           {R"(, "parallel_tool_calls": 1)", "parallel_tool_calls: must be a boolean"}}) {
    r = chat(rest, hermes);
    ASSERT_FALSE(r.ok()) << rest;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status();
  }
  // "auto" without tools, as SDKs send it, is no choice at all.
  r = ParseChatCompletionRequest(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "auto",
          "tools": [], "top_logprobs": 0})",
      hermes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tool_use.parse);
  r = chat(R"(, "tool_choice": "required")", Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--tool-call-format"), std::string::npos) << r.status();
}

TEST(OpenAiRequestTest, EarlierCallsArgumentsReachTheTemplateAsObjects) {
  absl::StatusOr<OpenAiRequest> r = Chat(R"({"model": "m", "messages": [
      {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}}]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ChatMessage& m = r->chat.messages(0);
  ASSERT_EQ(m.tool_calls_size(), 2);
  const google::protobuf::Value& first =
      m.tool_calls(0).fields().at("function").struct_value().fields().at("arguments");
  ASSERT_TRUE(first.has_struct_value());
  EXPECT_EQ(first.struct_value().fields().at("x").number_value(), 1);
  EXPECT_EQ(m.tool_calls(1).fields().at("function").struct_value().fields().at("arguments")
                .string_value(),
            "not json");
  // Arguments nested deeper than a body may be stay text.
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  r = Chat(R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "c",
      "type": "function", "function": {"name": "f", "arguments": "{\"a\": )" + deep + R"(}"}}]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->chat.messages(0).tool_calls(0).fields().at("function").struct_value().fields()
                  .at("arguments").has_string_value());
}

TEST(OpenAiRequestTest, LogprobsBecomeTheSamplingsLogprobs) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  absl::StatusOr<OpenAiRequest> chat =
      Chat(R"({"model": "m", )" + messages + R"(, "logprobs": true, "top_logprobs": 3})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_TRUE(chat->chat.sampling().logprobs());
  EXPECT_EQ(chat->chat.sampling().top_logprobs(), 3);
  chat = Chat(R"({"model": "m", )" + messages + R"(, "logprobs": false})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_FALSE(chat->chat.sampling().logprobs());
  // Completions' logprobs: N is the chosen token's and N more; 0 still asks for the first.
  for (int n : {0, 5}) {
    absl::StatusOr<OpenAiRequest> completion =
        Completion(absl::StrCat(R"({"model": "m", "prompt": "a", "logprobs": )", n, "}"));
    ASSERT_TRUE(completion.ok()) << completion.status();
    EXPECT_TRUE(completion->generate.sampling().logprobs());
    EXPECT_EQ(completion->generate.sampling().top_logprobs(), n);
  }
  absl::StatusOr<OpenAiRequest> completion = Completion(R"({"model": "m", "prompt": "a"})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_FALSE(completion->generate.sampling().logprobs());
}

// echo: the prompt leads the answer; with logprobs it is scored with the same number of likeliest
// tokens, and then max_tokens may be 0 (how evaluation harnesses score texts).
TEST(OpenAiRequestTest, EchoWithLogprobsScoresThePrompt) {
  absl::StatusOr<OpenAiRequest> plain = Completion(R"({"model": "m", "prompt": "a"})");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->echo);
  EXPECT_FALSE(plain->generate.sampling().has_prompt_logprobs());
  absl::StatusOr<OpenAiRequest> echo = Completion(R"({"model": "m", "prompt": "a", "echo": true})");
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_TRUE(echo->echo);
  EXPECT_FALSE(echo->generate.sampling().has_prompt_logprobs());  // text only: nothing to score
  // The prompt alone: the engine runs it as a scoring request whose scores are not shown.
  absl::StatusOr<OpenAiRequest> prompt_only =
      Completion(R"({"model": "m", "prompt": "a", "echo": true, "max_tokens": 0})");
  ASSERT_TRUE(prompt_only.ok()) << prompt_only.status();
  EXPECT_EQ(prompt_only->generate.sampling().prompt_logprobs(), 0);
  EXPECT_FALSE(prompt_only->generate.sampling().logprobs());
  absl::StatusOr<OpenAiRequest> scored = Completion(
      R"({"model": "m", "prompt": [1, 2, 3], "echo": true, "logprobs": 2, "max_tokens": 0})");
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_TRUE(scored->echo);
  EXPECT_EQ(scored->generate.sampling().prompt_logprobs(), 2);
  EXPECT_EQ(scored->generate.sampling().top_logprobs(), 2);
  EXPECT_EQ(scored->generate.sampling().max_new_tokens(), 0);
  // lm-evaluation-harness's loglikelihood request, as it sends it.
  absl::StatusOr<OpenAiRequest> harness =
      Completion(R"({"model": "m", "prompt": [[5, 6, 7]], "temperature": 0, "max_tokens": 1, )"
                 R"("logprobs": 1, "seed": 1234, "echo": true})");
  ASSERT_TRUE(harness.ok()) << harness.status();
  EXPECT_EQ(harness->generate.sampling().prompt_logprobs(), 1);
  EXPECT_EQ(harness->generate.token_ids().ids_size(), 3);
}

TEST(OpenAiRequestTest, LogitBiasBecomesTheSamplingsBias) {
  absl::StatusOr<OpenAiRequest> completion =
      Completion(R"({"model": "m", "prompt": "a", "logit_bias": {"5": -100, "12": 2.5}})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  const auto& bias = completion->generate.sampling().logit_bias();
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias.at(5), -100.0f);
  EXPECT_EQ(bias.at(12), 2.5f);
  // Out of range values reach the validation, which names them as the client wrote them.
  completion = Completion(R"({"model": "m", "prompt": "a", "logit_bias": {"5": 1e300}})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_GT(completion->generate.sampling().logit_bias().at(5), 100.0f);
  EXPECT_EQ(OpenAiParam("sampling.logit_bias[5]"), "logit_bias[5]");
}

TEST(OpenAiRequestTest, APredictionBecomesTheRequestsPrediction) {
  absl::StatusOr<OpenAiRequest> chat = Chat(
      R"({"model": "m", "messages": [{"role": "user", "content": "fix it"}],
          "prediction": {"type": "content", "content": "int main() {}"}})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->chat.prediction(), "int main() {}");
  // Text parts, joined as a message's are.
  chat = Chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                  "prediction": {"type": "content", "content": [{"type": "text", "text": "a"},
                                                                {"type": "text", "text": "b"}]}})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->chat.prediction(), "a\nb");
  absl::StatusOr<OpenAiRequest> completion = Completion(
      R"({"model": "m", "prompt": "a", "prediction": {"type": "content", "content": "b"}})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_EQ(completion->generate.prediction(), "b");
}

TEST(OpenAiRequestTest, WhatTandemDoesNotDoIsRefusedByName) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"messages": []})", "model: required"},
      {R"({"model": "other", "messages": []})", "model: 'other' is not served here"},
      {R"({"model": "m", "messages": "hi"})", "messages: must be an array of messages, got string"},
      {R"({"model": "m", )" + messages + R"(, "tool_choice": "required"})",
       "tool_choice: needs tools"},
      {R"({"model": "m", )" + messages + R"(, "response_format": {"type": "xml"}})",
       "response_format.type: must be \"text\", \"json_object\" or \"json_schema\", got \"xml\""},
      {R"({"model": "m", )" + messages + R"(, "response_format": {"type": 5}})",
       "response_format.type: must be a string"},
      {R"({"model": "m", )" + messages + R"(, "response_format": {"type": "json_schema"}})",
       "response_format.json_schema: required"},
      {R"({"model": "m", )" + messages +
           R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})",
       "response_format.json_schema.schema: required"},
      {R"({"model": "m", )" + messages +
           R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": {}, "x": 1}}})",
       "response_format.json_schema.x: unknown parameter"},
      {R"({"model": "m", )" + messages + R"(, "response_format": {"type": "text", "extra": 1}})",
       "response_format.extra: unknown parameter"},
      {R"({"model": "m", )" + messages + R"(, "logit_bias": {"five": 10}})",
       "logit_bias[\"five\"]: a key must be a token id"},
      {R"({"model": "m", )" + messages + R"(, "logit_bias": {"5": "up"}})",
       "logit_bias[5]: must be a number, got string"},
      {R"({"model": "m", )" + messages + R"(, "logit_bias": [5]})",
       "logit_bias: must be an object of token ids, got array"},
      {R"({"model": "m", )" + messages + R"(, "top_logprobs": 3})",
       "top_logprobs: only allowed with logprobs: true"},
      {R"({"model": "m", )" + messages + R"(, "logprobs": 1})",
       "logprobs: must be a boolean, got number"},
      {R"({"model": "m", )" + messages + R"(, "stream_options": {"include_usage": true}})",
       "stream_options: only allowed with stream: true"},
      {R"({"model": "m", )" + messages + R"(, "max_tokens": 5, "max_completion_tokens": 6})",
       "max_completion_tokens: differs from max_tokens"},
      {R"({"model": "m", )" + messages + R"(, "max_tokens": 0})",
       "max_tokens: must be at least 1: a chat answer has no prompt to echo"},
      {R"({"model": "m", )" + messages + R"(, "max_tokens": "5"})",
       "max_tokens: must be an integer, got string"},
      {R"({"model": "m", )" + messages + R"(, "seed": -1})", "seed: must be >= 0"},
      {R"({"model": "m", )" + messages + R"(, "stop": [1]})", "stop[0]: must be a string"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "hi", "audio": {"id": "a"}}]})",
       "messages[0].audio: unknown parameter"},
      {R"({"model": "m", )" + messages + R"(, "prediction": "text"})",
       "prediction: must be an object, got string"},
      {R"({"model": "m", )" + messages + R"(, "prediction": {"content": "x"}})",
       "prediction.type: required"},
      {R"({"model": "m", )" + messages + R"(, "prediction": {"type": "file", "content": "x"}})",
       "prediction.type: \"file\" is not \"content\""},
      {R"({"model": "m", )" + messages + R"(, "prediction": {"type": "content"}})",
       "prediction.content: required"},
      {R"({"model": "m", )" + messages +
           R"(, "prediction": {"type": "content", "content": [{"type": "image_url"}]}})",
       "prediction.content[0].type"},
      {R"({"model": "m", )" + messages +
           R"(, "prediction": {"type": "content", "content": "x", "extra": 1}})",
       "prediction.extra: unknown parameter"},
  };
  for (const auto& [body, message] : cases) {
    absl::StatusOr<OpenAiRequest> request = Chat(body);
    ASSERT_FALSE(request.ok()) << body;
    EXPECT_NE(request.status().message().find(message), std::string::npos)
        << body << " -> " << request.status();
  }
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"model": "m", "prompt": ["a", [1]]})",
            "prompt[1]: a list of prompts holds only strings or only arrays of token ids"},
           {R"({"model": "m", "prompt": [[1], 2]})", "prompt[1]: must be a string or an array"},
           {R"({"model": "m", "prompt": [[1], [2, "x"]]})", "prompt[1][1]: must be a token id"},
           {R"({"model": "m", "prompt": [1, "b"]})", "prompt[1]: must be a token id"},
           {R"({"model": "m", "prompt": ["a", "b", "c", "d", "e"], "n": 2, "best_of": 60})",
            "prompt: 5 prompts of 60 choices each are more than the 256"},
           {R"({"model": "m", "prompt": [1, 2.5]})", "prompt[1]: must be a token id"},
           {R"({"model": "m", "prompt": "a", "max_tokens": 0})",
            "max_tokens: 0 generates nothing, which only an echo of the prompt asks for"},
           {R"({"model": "m", "prompt": "a", "max_tokens": 0, "logprobs": 1})",
            "max_tokens: 0 generates nothing"},

           {R"({"model": "m", "prompt": "a", "echo": 1})", "echo: must be a boolean, got number"},
           {R"({"model": "m", "prompt": "a", "best_of": 2, "stream": true})",
            "best_of: the best answers are known only once all are generated"},
           {R"({"model": "m", "prompt": "a", "n": 3, "best_of": 2})",
            "best_of: must be in [n, 64] (n is 3), got 2"},
           {R"({"model": "m", "prompt": "a", "best_of": 65})",
            "best_of: must be in [n, 64] (n is 1), got 65"},
           {R"({"model": "m", "prompt": "a", "best_of": 0})",
            "best_of: must be in [n, 64] (n is 1), got 0"},
           {R"({"model": "m", "prompt": "a", "best_of": -2})",
            "best_of: must be in [n, 64] (n is 1), got -2"},
           {R"({"model": "m", "prompt": "a", "logprobs": 21})", "logprobs: must be in [0, 20]"},
           {R"({"model": "m", "prompt": "a", "logprobs": -1})", "logprobs: must be in [0, 20]"},
           {R"({"model": "m", "prompt": "a", "logprobs": true})", "logprobs: must be an integer"},
           {R"({"model": "m", "prompt": "a", "suffix": "z"})", "suffix: not supported"},
       }) {
    absl::StatusOr<OpenAiRequest> request = Completion(body);
    ASSERT_FALSE(request.ok()) << body;
    EXPECT_NE(request.status().message().find(message), std::string::npos)
        << body << " -> " << request.status();
  }
}

// n asks for several choices: any count the engine takes, on both endpoints; 1 when absent.
TEST(OpenAiRequestTest, NIsTheNumberOfChoices) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  absl::StatusOr<OpenAiRequest> chat = Chat(R"({"model": "m", "n": 5, )" + messages + "}");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->n, 5);
  absl::StatusOr<OpenAiRequest> one = Chat(R"({"model": "m", "n": null, )" + messages + "}");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->n, 1);
  absl::StatusOr<OpenAiRequest> completion =
      Completion(R"({"model": "m", "prompt": "a", "n": 64})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_EQ(completion->n, 64);
  EXPECT_EQ(completion->best_of, 64);  // best_of defaults to n
  absl::StatusOr<OpenAiRequest> best =
      Completion(R"({"model": "m", "prompt": "a", "n": 2, "best_of": 5})");
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->n, 2);
  EXPECT_EQ(best->best_of, 5);
  // Chat has no best_of.
  absl::StatusOr<OpenAiRequest> chat_best =
      Chat(R"({"model": "m", "best_of": 2, )" + messages + "}");
  ASSERT_FALSE(chat_best.ok());
  EXPECT_NE(chat_best.status().message().find("best_of: unknown parameter"), std::string::npos)
      << chat_best.status();
  // best_of equal to n streams: nothing is chosen.
  EXPECT_TRUE(
      Completion(R"({"model": "m", "prompt": "a", "n": 2, "best_of": 2, "stream": true})").ok());
  for (const auto& [n, message] : std::vector<std::pair<std::string, std::string>>{
           {"0", "n: must be in [1, 64], got 0"},
           {"65", "n: must be in [1, 64], got 65"},
           {"-3", "n: must be in [1, 64], got -3"},
           {"9999999999999", "n: must be in [1, 64], got 9999999999999"},
           {"\"2\"", "n: must be an integer"},
           {"1.5", "n: must be an integer"},
       }) {
    const std::string body = R"({"model": "m", "prompt": "a", "n": )" + n + "}";
    absl::StatusOr<OpenAiRequest> request = Completion(body);
    ASSERT_FALSE(request.ok()) << body;
    EXPECT_NE(request.status().message().find(message), std::string::npos)
        << body << " -> " << request.status();
  }
}

TEST(OpenAiRequestTest, ValidationFieldsReadAsTheClientsParameters) {
  EXPECT_EQ(OpenAiParam("sampling.max_new_tokens"), "max_tokens");
  EXPECT_EQ(OpenAiParam("sampling.stop_strings[1]"), "stop[1]");
  EXPECT_EQ(OpenAiParam("sampling.top_p"), "top_p");
  EXPECT_EQ(OpenAiParam("sampling.json_schema"), "response_format.json_schema.schema");
  EXPECT_EQ(OpenAiParam("token_ids.ids[3]"), "prompt[3]");
  EXPECT_EQ(OpenAiParam("text"), "prompt");
  EXPECT_EQ(OpenAiParam("messages[2].role"), "messages[2].role");
  OpenAiError error =
      ErrorFromStatus(absl::InvalidArgumentError("sampling.max_new_tokens: must be in [1, 9]"));
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.param, "max_tokens");
  EXPECT_EQ(error.message, "max_tokens: must be in [1, 9]");
  EXPECT_EQ(
      ErrorFromStatus(absl::ResourceExhaustedError("too many concurrent streams")).http_status,
      429);
  EXPECT_FALSE(ErrorFromStatus(absl::UnavailableError("the server is shutting down")).param);
}

// Mutated bodies (bytes flipped, cut, doubled) are answered with a status, whatever they hold.
TEST(OpenAiRequestTest, MangledBodiesGetAStatus) {
  const std::string seed = R"({"model": "m", "messages": [{"role": "user", "content": [)"
                           R"({"type": "text", "text": "hi"}], "tool_calls": [{"a": [1, {}]}]}],)"
                           R"( "tools": [{"f": null}], "stop": ["x"], "response_format": {},)"
                           R"( "chat_template_kwargs": {"k": [true]}, "prompt": [[1], "a"]})";
  const std::string alphabet = "{}[]\",:0123456789.-eE truefalsn\\u\xff";
  std::mt19937 random(7);
  for (int i = 0; i < 3000; ++i) {
    std::string body = seed;
    for (int edits = 1 + static_cast<int>(random() % 4); edits > 0; --edits) {
      const size_t at = random() % body.size();
      switch (random() % 3) {
        case 0:
          body[at] = alphabet[random() % alphabet.size()];
          break;
        case 1:
          body.erase(at, 1 + random() % 8);
          break;
        default:
          body.insert(at, body.substr(at, 1 + random() % 16));
          break;
      }
      if (body.empty()) body.push_back('{');
    }
    (void)Chat(body);
    (void)Completion(body);
  }
}

}  // namespace
}  // namespace tandem::server
