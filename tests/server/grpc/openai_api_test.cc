// OpenAI's HTTP API on a real server: a greedy chat completion says exactly what the gRPC Chat
// says for the same conversation (and a completion what Generate says), a stream's chunks add up
// to the whole answer, a repeated prompt is served from the prefix cache, /v1/models lists the
// model, bad requests get OpenAI errors naming the parameter, tokens are checked, a client that
// hangs up mid-stream has its request cancelled while another completes, a drain lets requests
// in flight finish, and /health turns 503 when the server drains.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "models/byte_level.h"
#include "nlohmann/json.hpp"
#include "server/openai/openai_endpoint.h"
#include "tests/server/grpc/grpc_test_util.h"
#include "tests/server/grpc/openai_test_events.h"
#include "tests/server/http_test_client.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;
using testing::Client;
using testing::Eventually;
using testing::HttpPost;
using testing::Parse;
using testing::SseEvents;
using testing::StreamResult;

constexpr char kModel[] = "zamba2-tiny";

int CountEvents(const std::string& sse) {
  int events = 0;
  for (size_t at = sse.find("data: "); at != std::string::npos; at = sse.find("data: ", at + 1)) {
    ++events;
  }
  return events;
}

json ChatBody(const std::string& content, int max_tokens) {
  return {{"model", kModel},
          {"messages",
           {{{"role", "system"}, {"content", "You answer briefly."}},
            {{"role", "user"}, {"content", content}}}},
          {"temperature", 0},
          {"max_tokens", max_tokens}};
}

// The gRPC twin of ChatBody: the same conversation, greedy.
v1::ChatRequest GrpcChat(const std::string& content, int max_tokens) {
  v1::ChatRequest request;
  v1::ChatMessage* system = request.add_messages();
  system->set_role("system");
  system->set_content("You answer briefly.");
  v1::ChatMessage* user = request.add_messages();
  user->set_role("user");
  user->set_content(content);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(max_tokens);
  return request;
}

class OpenAiApiTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(ServerConfig()); }
  void Start(ServerConfig config) {
    endpoint_.reset();
    server_.reset();
    if (model_ == nullptr) model_ = testing::LoadServedFixture();
    ASSERT_NE(model_, nullptr);
    ServerConfig small = testing::SmallServerConfig();
    small.security = config.security;
    small.limits.max_concurrent_streams = config.limits.max_concurrent_streams;
    if (config.limits.max_prompt_tokens != ServerConfig().limits.max_prompt_tokens) {
      small.limits.max_prompt_tokens = config.limits.max_prompt_tokens;
    }
    small.engine.hydragen = config.engine.hydragen;
    // Room for a stream that cannot finish before its client hangs up.
    small.engine.scheduler.max_new_tokens_limit = 1 << 20;
    small.engine.memory_bytes = 256 << 20;
    small.tool_call_format = tool_call_format_;
    absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(*model_, small);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    OpenAiEndpointOptions options;
    options.model_name = kModel;
    options.max_body_bytes = 8192;
    absl::StatusOr<std::unique_ptr<OpenAiEndpoint>> endpoint =
        OpenAiEndpoint::Start(server_->state(), options);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = *std::move(endpoint);
  }
  testing::HttpResponse Post(const std::string& target, const json& body,
                             const std::string& headers = "") {
    return HttpPost(endpoint_->port(), target, body.dump(), headers);
  }
  // Sends a chat completion on a connection of its own and returns the socket (-1 on failure).
  int SendRaw(const json& body) {
    const std::string text = body.dump();
    const int fd = testing::ConnectLoopback(endpoint_->port());
    const std::string request =
        "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: " + std::to_string(text.size()) +
        "\r\n\r\n" + text;
    if (fd >= 0 && send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
                       static_cast<ssize_t>(request.size())) {
      close(fd);
      return -1;
    }
    return fd;
  }
  std::string Scrape() { return testing::HttpGet(server_->metrics_port(), "/metrics").body; }
  // Starts a streamed chat of `n` choices that would run for a long time, reads until a chunk
  // past the n role chunks has arrived (the request is generating), and hangs up.
  void StreamLongChatAndHangUp(int n) {
    json body = ChatBody("Tell a long story.", 20000);
    body["stream"] = true;
    body["ignore_eos"] = true;
    body["n"] = n;
    const int fd = SendRaw(body);
    ASSERT_GE(fd, 0);
    std::string received;
    char buffer[4096];
    while (CountEvents(received) < n + 1) {
      const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
      ASSERT_GT(got, 0) << received;
      received.append(buffer, got);
    }
    close(fd);
  }

  std::optional<ToolCallFormat> tool_call_format_;
  std::unique_ptr<ServedModel> model_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<OpenAiEndpoint> endpoint_;  // destroyed before the server it serves
};

TEST_F(OpenAiApiTest, GreedyChatSaysWhatGrpcChatSays) {
  const v1::ChatRequest grpc_request = GrpcChat("Name three rivers.", 12);
  Client client(server_->port());
  StreamResult expected = client.Chat(grpc_request);
  ASSERT_TRUE(expected.status.ok()) << expected.status.error_message();

  testing::HttpResponse response = Post("/v1/chat/completions", ChatBody("Name three rivers.", 12));
  ASSERT_EQ(response.status, 200) << response.body;
  json answer = Parse(response.body);
  EXPECT_EQ(answer["object"], "chat.completion");
  EXPECT_EQ(answer["model"], kModel);
  EXPECT_TRUE(absl::StartsWith(answer["id"].get<std::string>(), "chatcmpl-"));
  const json& choice = answer["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], expected.text);
  EXPECT_EQ(choice["finish_reason"],
            expected.complete.finish_reason() == v1::LENGTH ? "length" : "stop");
  const json& usage = answer["usage"];
  EXPECT_EQ(usage["completion_tokens"], expected.tokens.size());
  EXPECT_EQ(usage["prompt_tokens"], expected.complete.usage().prompt_tokens());
  EXPECT_EQ(usage["total_tokens"],
            usage["prompt_tokens"].get<int64_t>() + usage["completion_tokens"].get<int64_t>());
  // The same prompt again: served from the prefix cache.
  EXPECT_GT(usage["prompt_tokens_details"]["cached_tokens"], 0);

  const std::string scrape = Scrape();
  EXPECT_TRUE(
      absl::StrContains(scrape, "tandem_requests_total{code=\"OK\",rpc=\"ChatCompletions\"} 1"))
      << scrape;

  // gRPC Chat scores its rendered prompt too (SamplingParams.prompt_logprobs), with the same
  // answer; the scores come in the first chunk, one per prompt token after the first.
  v1::ChatRequest scored_request = grpc_request;
  scored_request.mutable_sampling()->set_prompt_logprobs(2);
  StreamResult scored = client.Chat(scored_request);
  ASSERT_TRUE(scored.status.ok()) << scored.status.error_message();
  EXPECT_EQ(scored.text, expected.text);
  EXPECT_EQ(scored.prompt_logprobs_chunk, 0);
  ASSERT_EQ(static_cast<int64_t>(scored.prompt_logprobs.size()),
            scored.complete.usage().prompt_tokens() - 1);
  for (const v1::TokenLogprobs& entry : scored.prompt_logprobs) EXPECT_EQ(entry.top_size(), 2);
  EXPECT_EQ(scored.complete.usage().cached_tokens(), 0);  // every position needed its logits
}

// OpenAI's predicted outputs: the same answer, with the drafted tokens it confirmed counted in
// usage.completion_tokens_details as OpenAI counts them.
TEST_F(OpenAiApiTest, APredictedOutputGivesTheSameAnswer) {
  testing::HttpResponse plain = Post("/v1/chat/completions", ChatBody("Name four seas.", 16));
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json answer = Parse(plain.body);
  const json& details = answer["usage"]["completion_tokens_details"];
  EXPECT_EQ(details["accepted_prediction_tokens"], 0);
  EXPECT_EQ(details["rejected_prediction_tokens"], 0);
  const std::string content = answer["choices"][0]["message"]["content"];

  json body = ChatBody("Name four seas.", 16);
  body["prediction"] = {{"type", "content"}, {"content", content}};
  testing::HttpResponse predicted = Post("/v1/chat/completions", body);
  ASSERT_EQ(predicted.status, 200) << predicted.body;
  const json again = Parse(predicted.body);
  EXPECT_EQ(again["choices"][0]["message"]["content"], content);
  EXPECT_GT(again["usage"]["completion_tokens_details"]["accepted_prediction_tokens"], 0)
      << predicted.body;
  EXPECT_EQ(again["usage"]["completion_tokens"], answer["usage"]["completion_tokens"]);

  body["prediction"] = {{"type", "file"}, {"content", content}};
  testing::HttpResponse bad = Post("/v1/chat/completions", body);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_TRUE(absl::StrContains(bad.body, "prediction.type")) << bad.body;
}

TEST_F(OpenAiApiTest, StreamedChunksAddUpToTheWholeAnswer) {
  testing::HttpResponse whole = Post("/v1/chat/completions", ChatBody("Count to five.", 10));
  ASSERT_EQ(whole.status, 200) << whole.body;
  json body = ChatBody("Count to five.", 10);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  testing::HttpResponse streamed = Post("/v1/chat/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_TRUE(absl::StrContains(streamed.head, "Content-Type: text/event-stream")) << streamed.head;
  bool done = false;
  std::vector<json> events = SseEvents(streamed.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    EXPECT_TRUE(events[i]["usage"].is_null());
    text += events[i]["choices"][0]["delta"].value("content", "");
  }
  const json answer = Parse(whole.body);
  EXPECT_EQ(text, answer["choices"][0]["message"]["content"]);
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"],
            answer["choices"][0]["finish_reason"]);
  const json& last = events.back();  // include_usage: the usage, without choices
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], answer["usage"]["completion_tokens"]);
  EXPECT_GT(last["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

// Sampled choices decode beside each other from one cached prompt: Hydragen on every page they
// share, which resumes each row's own attention (bit for bit a lone request's); these tests
// compare bits.
ServerConfig SharingEveryPage() {
  ServerConfig config;
  config.engine.hydragen.min_shared_work = 0;
  return config;
}

json SampledChat(const std::string& content, int max_tokens, uint64_t seed) {
  json body = ChatBody(content, max_tokens);
  body["temperature"] = 1.0;
  body["seed"] = seed;
  return body;
}

// n: each choice is what a lone request with its seed (engine::ChoiceSeed) answers, the choices
// are numbered in order, and the usage counts the prompt once and every choice's tokens.
TEST_F(OpenAiApiTest, SeveralChoicesAreLoneAnswersWithTheirSeeds) {
  Start(SharingEveryPage());
  json body = SampledChat("Tell me about boats.", 12, 7);
  body["n"] = 3;
  testing::HttpResponse response = Post("/v1/chat/completions", body);
  ASSERT_EQ(response.status, 200) << response.body;
  const json answer = Parse(response.body);
  ASSERT_EQ(answer["choices"].size(), 3u) << response.body;
  int64_t completion_tokens = 0;
  std::vector<std::string> contents;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const json& choice = answer["choices"][i];
    EXPECT_EQ(choice["index"], i);
    testing::HttpResponse alone = Post(
        "/v1/chat/completions", SampledChat("Tell me about boats.", 12, engine::ChoiceSeed(7, i)));
    ASSERT_EQ(alone.status, 200) << alone.body;
    const json lone = Parse(alone.body);
    EXPECT_EQ(choice["message"]["content"], lone["choices"][0]["message"]["content"]);
    EXPECT_EQ(choice["finish_reason"], lone["choices"][0]["finish_reason"]);
    EXPECT_EQ(answer["usage"]["prompt_tokens"], lone["usage"]["prompt_tokens"]);
    completion_tokens += lone["usage"]["completion_tokens"].get<int64_t>();
    contents.push_back(choice["message"]["content"]);
  }
  EXPECT_EQ(answer["usage"]["completion_tokens"], completion_tokens);
  EXPECT_TRUE(contents[0] != contents[1] || contents[0] != contents[2]) << response.body;
  // One call, however many choices.
  const std::string scrape = Scrape();
  EXPECT_TRUE(
      absl::StrContains(scrape, "tandem_requests_total{code=\"OK\",rpc=\"ChatCompletions\"} 4"))
      << scrape;
}

// A stream of n choices: each opens with the role and ends with its finish reason, the chunks
// say which choice they belong to, and each choice's text adds up to the whole answer's.
TEST_F(OpenAiApiTest, StreamedChoicesAddUpToTheWholeAnswersChoices) {
  Start(SharingEveryPage());
  json body = SampledChat("Describe a forest.", 10, 99);
  body["n"] = 2;
  testing::HttpResponse whole = Post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = Parse(whole.body);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  testing::HttpResponse streamed = Post("/v1/chat/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  bool done = false;
  std::vector<json> events = SseEvents(streamed.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 5u);
  std::vector<std::string> text(2);
  std::vector<int> roles(2), finishes(2);
  for (size_t e = 0; e + 1 < events.size(); ++e) {
    ASSERT_EQ(events[e]["choices"].size(), 1u) << events[e];
    const json& choice = events[e]["choices"][0];
    const int i = choice["index"];
    ASSERT_TRUE(i == 0 || i == 1) << events[e];
    EXPECT_EQ(finishes[i], 0) << "a chunk after choice " << i << " finished";
    if (choice["delta"].contains("role")) ++roles[i];
    text[i] += choice["delta"].value("content", "");
    if (!choice["finish_reason"].is_null()) {
      ++finishes[i];
      EXPECT_EQ(choice["finish_reason"], answer["choices"][i]["finish_reason"]);
    }
  }
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(roles[i], 1);
    EXPECT_EQ(finishes[i], 1);
    EXPECT_EQ(text[i], answer["choices"][i]["message"]["content"]);
  }
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], answer["usage"]["completion_tokens"]);
}

// best_of: of best_of candidates (each a lone request with its seed), the answer lists the n
// with the highest mean token logprob, best first, without logprobs unless asked for; the usage
// counts every candidate's tokens.
TEST_F(OpenAiApiTest, BestOfListsTheCandidatesWithTheHighestMeanLogprob) {
  Start(SharingEveryPage());
  const std::vector<int32_t> ids = testing::Tokens(20, 5, 1024);
  json body = {{"model", kModel},    {"prompt", ids}, {"max_tokens", 8},
               {"temperature", 1.0}, {"seed", 11},    {"ignore_eos", true}};
  struct Candidate {
    std::string text;
    double mean = 0;
    json logprobs;
  };
  std::vector<Candidate> candidates;
  int64_t completion_tokens = 0;
  for (int i = 0; i < 4; ++i) {
    json alone = body;
    alone["seed"] = engine::ChoiceSeed(11, i);
    alone["logprobs"] = 0;
    testing::HttpResponse response = Post("/v1/completions", alone);
    ASSERT_EQ(response.status, 200) << response.body;
    const json answer = Parse(response.body);
    const json& choice = answer["choices"][0];
    double sum = 0;
    for (const json& logprob : choice["logprobs"]["token_logprobs"]) sum += logprob.get<double>();
    candidates.push_back(
        {choice["text"], sum / choice["logprobs"]["token_logprobs"].size(), choice["logprobs"]});
    completion_tokens += answer["usage"]["completion_tokens"].get<int64_t>();
  }
  std::vector<size_t> best = {0, 1, 2, 3};
  std::stable_sort(best.begin(), best.end(),
                   [&](size_t a, size_t b) { return candidates[a].mean > candidates[b].mean; });
  // Otherwise an answer that ignored the ranking would pass: then pick another seed.
  ASSERT_FALSE(best[0] == 0 && best[1] == 1);

  body["best_of"] = 4;
  body["n"] = 2;
  testing::HttpResponse response = Post("/v1/completions", body);
  ASSERT_EQ(response.status, 200) << response.body;
  const json answer = Parse(response.body);
  ASSERT_EQ(answer["choices"].size(), 2u) << response.body;
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(answer["choices"][k]["index"], k);
    EXPECT_EQ(answer["choices"][k]["text"], candidates[best[k]].text);
    EXPECT_TRUE(answer["choices"][k]["logprobs"].is_null());
  }
  EXPECT_EQ(answer["usage"]["completion_tokens"], completion_tokens);
  // The ranking's logprobs change no token: the best candidate alone, without logprobs.
  json alone = body;
  alone.erase("best_of");
  alone.erase("n");
  alone["seed"] = engine::ChoiceSeed(11, static_cast<int32_t>(best[0]));
  testing::HttpResponse plain = Post("/v1/completions", alone);
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(Parse(plain.body)["choices"][0]["text"], candidates[best[0]].text);
  // Asked for, each listed candidate's logprobs are its own.
  body["logprobs"] = 0;
  testing::HttpResponse with_logprobs = Post("/v1/completions", body);
  ASSERT_EQ(with_logprobs.status, 200) << with_logprobs.body;
  const json listed = Parse(with_logprobs.body)["choices"];
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(listed[k]["logprobs"], candidates[best[k]].logprobs);
  }

  // A list of two prompts: each prompt's best two, prompt by prompt. The second prompt's
  // candidates are ranked from lone calls too.
  const std::vector<int32_t> other = testing::Tokens(16, 9, 1024);
  std::vector<std::string> other_texts;
  std::vector<double> other_means;
  for (int i = 0; i < 4; ++i) {
    json alone_other = body;
    alone_other.erase("best_of");
    alone_other.erase("n");
    alone_other["prompt"] = other;
    alone_other["seed"] = engine::ChoiceSeed(11, i);
    testing::HttpResponse lone = Post("/v1/completions", alone_other);
    ASSERT_EQ(lone.status, 200) << lone.body;
    const json choice = Parse(lone.body)["choices"][0];
    double sum = 0;
    for (const json& logprob : choice["logprobs"]["token_logprobs"]) sum += logprob.get<double>();
    other_texts.push_back(choice["text"]);
    other_means.push_back(sum / choice["logprobs"]["token_logprobs"].size());
  }
  std::vector<size_t> other_best = {0, 1, 2, 3};
  std::stable_sort(other_best.begin(), other_best.end(),
                   [&](size_t a, size_t b) { return other_means[a] > other_means[b]; });
  body["prompt"] = {ids, other};
  testing::HttpResponse both = Post("/v1/completions", body);
  ASSERT_EQ(both.status, 200) << both.body;
  const json both_choices = Parse(both.body)["choices"];
  ASSERT_EQ(both_choices.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(both_choices[k]["index"], k);
    EXPECT_EQ(both_choices[k]["text"],
              k < 2 ? candidates[best[k]].text : other_texts[other_best[k - 2]]);
  }
}

// Every choice takes one of the server's stream slots: n beyond the free ones is refused whole,
// and the slots all come back after an answer.
TEST_F(OpenAiApiTest, ChoicesTakeAStreamSlotEach) {
  ServerConfig config;
  config.limits.max_concurrent_streams = 2;
  Start(config);
  json body = ChatBody("hi", 3);
  body["n"] = 3;
  // More choices than the server has streams can never run: the client's error, not a retry.
  testing::HttpResponse refused = Post("/v1/chat/completions", body);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(Parse(refused.body)["error"]["param"], "n") << refused.body;
  EXPECT_TRUE(absl::StrContains(refused.body, "3 choices need as many streams")) << refused.body;
  body["n"] = 2;
  for (int i = 0; i < 4; ++i) {
    body["stream"] = (i % 2 == 1);
    testing::HttpResponse response = Post("/v1/chat/completions", body);
    ASSERT_EQ(response.status, 200) << "request " << i << ": " << response.body;
  }
  body["n"] = 1;
  EXPECT_EQ(Post("/v1/chat/completions", body).status, 200);
  // A list of prompts takes a slot per prompt, all at once or none.
  json prompts = {{"model", kModel}, {"prompt", {"a", "b", "c"}}, {"max_tokens", 2}};
  testing::HttpResponse too_many = Post("/v1/completions", prompts);
  EXPECT_EQ(too_many.status, 400);
  EXPECT_EQ(Parse(too_many.body)["error"]["param"], "prompt") << too_many.body;
  prompts["prompt"] = {"a", "b"};
  for (int i = 0; i < 3; ++i) {
    testing::HttpResponse response = Post("/v1/completions", prompts);
    ASSERT_EQ(response.status, 200) << "request " << i << ": " << response.body;
    EXPECT_EQ(Parse(response.body)["choices"].size(), 2u);
  }
}

TEST_F(OpenAiApiTest, CompletionSaysWhatGenerateSays) {
  const std::vector<int32_t> ids = testing::Tokens(12, 3, 1024);
  Client client(server_->port());
  StreamResult expected = client.Generate(testing::GreedyIds(ids, 6));
  ASSERT_TRUE(expected.status.ok()) << expected.status.error_message();
  json body = {{"model", kModel},
               {"prompt", ids},
               {"max_tokens", 6},
               {"temperature", 0},
               {"ignore_eos", true}};
  testing::HttpResponse response = Post("/v1/completions", body);
  ASSERT_EQ(response.status, 200) << response.body;
  json answer = Parse(response.body);
  EXPECT_EQ(answer["object"], "text_completion");
  EXPECT_EQ(answer["choices"][0]["text"], expected.text);
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(answer["usage"]["completion_tokens"], 6);

  body["stream"] = true;
  testing::HttpResponse streamed = Post("/v1/completions", body);
  bool done = false;
  std::string text;
  for (const json& event : SseEvents(streamed.body, &done)) {
    EXPECT_EQ(event["object"], "text_completion");
    text += event["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, expected.text);

  // logit_bias as gRPC takes it: the greedy choice banned, another forced.
  v1::GenerateRequest biased = testing::GreedyIds(ids, 6);
  (*biased.mutable_sampling()->mutable_logit_bias())[expected.tokens[0]] = -100.0f;
  (*biased.mutable_sampling()->mutable_logit_bias())[11] = 30.0f;
  StreamResult grpc_biased = client.Generate(biased);
  ASSERT_TRUE(grpc_biased.status.ok()) << grpc_biased.status.error_message();
  EXPECT_NE(grpc_biased.tokens[0], expected.tokens[0]);
  body["stream"] = false;
  body["logit_bias"] = {{std::to_string(expected.tokens[0]), -100}, {"11", 30}};
  testing::HttpResponse with_bias = Post("/v1/completions", body);
  ASSERT_EQ(with_bias.status, 200) << with_bias.body;
  EXPECT_EQ(Parse(with_bias.body)["choices"][0]["text"], grpc_biased.text);
  body["logit_bias"] = {{"11", 101}};
  testing::HttpResponse out_of_range = Post("/v1/completions", body);
  EXPECT_EQ(out_of_range.status, 400);
  EXPECT_EQ(Parse(out_of_range.body)["error"]["param"], "logit_bias[11]") << out_of_range.body;
}

// Logprobs over HTTP are gRPC's: the same tokens, spelled as the tokenizer spells them, with the
// same values, whole or streamed; a completion's lists run in parallel.
TEST_F(OpenAiApiTest, LogprobsAreTheGrpcLogprobsSpelledOut) {
  v1::ChatRequest grpc_request = GrpcChat("Name a river.", 8);
  grpc_request.mutable_sampling()->set_top_logprobs(3);
  Client client(server_->port());
  StreamResult expected = client.Chat(grpc_request);
  ASSERT_TRUE(expected.status.ok()) << expected.status.error_message();
  ASSERT_EQ(expected.logprobs.size(), expected.tokens.size());
  const models::Tokenizer& tokenizer = *model_->tokenizer;
  auto bytes_of = [](const json& entry) {
    std::string bytes;
    for (const json& b : entry["bytes"]) bytes += static_cast<char>(b.get<int>());
    return bytes;
  };
  auto expect_entries = [&](const json& content) {
    ASSERT_EQ(content.size(), expected.logprobs.size()) << content;
    for (size_t i = 0; i < content.size(); ++i) {
      const v1::TokenLogprobs& want = expected.logprobs[i];
      EXPECT_EQ(bytes_of(content[i]), tokenizer.TokenBytes(want.token_id())) << i;
      EXPECT_EQ(content[i]["logprob"].get<float>(), want.logprob()) << i;
      ASSERT_EQ(content[i]["top_logprobs"].size(), 3u) << i;
      for (int k = 0; k < 3; ++k) {
        const json& top = content[i]["top_logprobs"][k];
        EXPECT_EQ(bytes_of(top), tokenizer.TokenBytes(want.top(k).token_id())) << i;
        EXPECT_EQ(top["logprob"].get<float>(), want.top(k).logprob()) << i;
      }
      // Greedy: the chosen token is the likeliest.
      EXPECT_EQ(content[i]["logprob"], content[i]["top_logprobs"][0]["logprob"]) << i;
    }
  };
  json body = ChatBody("Name a river.", 8);
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  testing::HttpResponse whole = Post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = Parse(whole.body);
  EXPECT_EQ(answer["choices"][0]["message"]["content"], expected.text);
  expect_entries(answer["choices"][0]["logprobs"]["content"]);

  body["stream"] = true;
  testing::HttpResponse streamed = Post("/v1/chat/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  bool done = false;
  json content = json::array();
  std::string text;
  for (const json& event : SseEvents(streamed.body, &done)) {
    const json& choice = event["choices"][0];
    text += choice["delta"].value("content", "");
    if (choice["logprobs"].is_null()) continue;
    for (const json& entry : choice["logprobs"]["content"]) content.push_back(entry);
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, expected.text);
  expect_entries(content);

  // Without logprobs the choices say null.
  testing::HttpResponse plain = Post("/v1/chat/completions", ChatBody("Name a river.", 2));
  EXPECT_TRUE(Parse(plain.body)["choices"][0]["logprobs"].is_null()) << plain.body;

  const std::vector<int32_t> ids = testing::Tokens(12, 3, 1024);
  json completion = {{"model", kModel}, {"prompt", ids},       {"max_tokens", 6},
                     {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 2}};
  testing::HttpResponse response = Post("/v1/completions", completion);
  ASSERT_EQ(response.status, 200) << response.body;
  const json completed = Parse(response.body);
  const json& logprobs = completed["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), 6u) << logprobs;
  ASSERT_EQ(logprobs["token_logprobs"].size(), 6u);
  ASSERT_EQ(logprobs["top_logprobs"].size(), 6u);
  ASSERT_EQ(logprobs["text_offset"].size(), 6u);
  std::string spelled;
  for (size_t i = 0; i < 6; ++i) {
    // Offsets count characters (code points), as OpenAI's (Python's) strings do.
    int64_t characters = 0;
    for (unsigned char c : spelled) characters += (c & 0xC0) != 0x80;
    EXPECT_EQ(logprobs["text_offset"][i], characters) << i;
    spelled += logprobs["tokens"][i].get<std::string>();
    const json& top = logprobs["top_logprobs"][i];
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 3u);  // the two likeliest and the chosen one, which greedy is among
    ASSERT_TRUE(top.contains(logprobs["tokens"][i].get<std::string>())) << top;
    EXPECT_EQ(top.at(logprobs["tokens"][i].get<std::string>()), logprobs["token_logprobs"][i]);
  }
  // The fixture's tokens here are whole characters, so they spell the text.
  EXPECT_EQ(spelled, completed["choices"][0]["text"]);
}

// echo with logprobs, as lm-evaluation-harness scores a text: the prompt's tokens lead the
// logprobs (the first with null), with gRPC's prompt_logprobs values, then the answer's; the text
// starts with the prompt; max_tokens 0 scores without generating; streamed, the prompt comes
// first and everything adds up to the whole answer; every choice of n echoes.
TEST_F(OpenAiApiTest, EchoScoresThePromptAsGrpcPromptLogprobsDo) {
  const std::vector<int32_t> ids = testing::Tokens(12, 3, 1024);
  v1::GenerateRequest grpc_request = testing::GreedyIds(ids, 1);
  grpc_request.mutable_sampling()->set_logprobs(true);
  grpc_request.mutable_sampling()->set_top_logprobs(1);
  grpc_request.mutable_sampling()->set_prompt_logprobs(1);
  Client client(server_->port());
  StreamResult expected = client.Generate(grpc_request);
  ASSERT_TRUE(expected.status.ok()) << expected.status.error_message();
  ASSERT_EQ(expected.prompt_logprobs.size(), ids.size() - 1);
  EXPECT_EQ(expected.prompt_logprobs_chunk, 0);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    EXPECT_EQ(expected.prompt_logprobs[i].token_id(), ids[i + 1]) << i;
    EXPECT_EQ(expected.prompt_logprobs[i].top_size(), 1) << i;
  }
  const std::string prompt_text = model_->tokenizer->Decode(ids, true);

  // The harness's request: the prompt as a list of one list of ids.
  json body = {{"model", kModel}, {"prompt", {ids}}, {"temperature", 0}, {"max_tokens", 1},
               {"logprobs", 1},   {"seed", 1234},    {"echo", true}};
  testing::HttpResponse response = Post("/v1/completions", body);
  ASSERT_EQ(response.status, 200) << response.body;
  const json answer = Parse(response.body);
  const json& choice = answer["choices"][0];
  EXPECT_EQ(choice["text"], prompt_text + expected.text);
  const json& logprobs = choice["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), ids.size() + 1) << logprobs;
  ASSERT_EQ(logprobs["token_logprobs"].size(), ids.size() + 1);
  ASSERT_EQ(logprobs["top_logprobs"].size(), ids.size() + 1);
  ASSERT_EQ(logprobs["text_offset"].size(), ids.size() + 1);
  EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
  EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
  EXPECT_EQ(logprobs["text_offset"][0], 0);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_EQ(logprobs["token_logprobs"][i].get<float>(), expected.prompt_logprobs[i - 1].logprob())
        << i;
    const std::string token = logprobs["tokens"][i].get<std::string>();
    EXPECT_EQ(token, models::Utf8Lossy(model_->tokenizer->TokenBytes(ids[i]))) << i;
    EXPECT_EQ(logprobs["top_logprobs"][i].at(token), logprobs["token_logprobs"][i]) << i;
    EXPECT_GE(logprobs["text_offset"][i], logprobs["text_offset"][i - 1]) << i;
  }
  // The answer's text starts where the echoed prompt ends, in characters.
  int64_t prompt_characters = 0;
  for (unsigned char c : prompt_text) prompt_characters += (c & 0xC0) != 0x80;
  EXPECT_EQ(logprobs["text_offset"][ids.size()], prompt_characters);
  EXPECT_EQ(logprobs["token_logprobs"][ids.size()].get<float>(), expected.logprobs[0].logprob());
  EXPECT_EQ(answer["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(answer["usage"]["completion_tokens"], 1);

  // Scoring alone.
  body["max_tokens"] = 0;
  testing::HttpResponse scored = Post("/v1/completions", body);
  ASSERT_EQ(scored.status, 200) << scored.body;
  const json scored_answer = Parse(scored.body);
  EXPECT_EQ(scored_answer["choices"][0]["text"], prompt_text);
  EXPECT_EQ(scored_answer["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(scored_answer["usage"]["completion_tokens"], 0);
  const json& scored_logprobs = scored_answer["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(scored_logprobs.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(scored_logprobs[i], logprobs["token_logprobs"][i]);

  // Streamed, the chunks add up to the whole answer.
  body["max_tokens"] = 1;
  body["stream"] = true;
  testing::HttpResponse streamed = Post("/v1/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  bool done = false;
  std::string text;
  json token_logprobs = json::array();
  for (const json& event : SseEvents(streamed.body, &done)) {
    const json& delta = event["choices"][0];
    text += delta["text"].get<std::string>();
    if (delta["logprobs"].is_null()) continue;
    for (const json& v : delta["logprobs"]["token_logprobs"]) token_logprobs.push_back(v);
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, prompt_text + expected.text);
  EXPECT_EQ(token_logprobs, logprobs["token_logprobs"]);

  // Every choice echoes (the engine scores the prompt once and gives each choice its scores),
  // streamed: each choice's first chunk is the prompt, with its logprobs.
  body["n"] = 2;
  body["temperature"] = 1;
  testing::HttpResponse streamed_choices = Post("/v1/completions", body);
  ASSERT_EQ(streamed_choices.status, 200) << streamed_choices.body;
  std::vector<bool> opened(2, false);
  for (const json& event : SseEvents(streamed_choices.body, &done)) {
    const json& delta = event["choices"][0];
    const int index = delta["index"].get<int>();
    ASSERT_TRUE(index == 0 || index == 1) << event;
    if (opened[index]) continue;
    opened[index] = true;
    EXPECT_EQ(delta["text"], prompt_text);
    EXPECT_EQ(delta["logprobs"]["token_logprobs"].size(), ids.size());
  }
  EXPECT_TRUE(done);
  EXPECT_TRUE(opened[0] && opened[1]);
  body["stream"] = false;
  body["n"] = 2;
  body["temperature"] = 1;
  testing::HttpResponse choices = Post("/v1/completions", body);
  ASSERT_EQ(choices.status, 200) << choices.body;
  const json two = Parse(choices.body)["choices"];
  ASSERT_EQ(two.size(), 2u);
  for (const json& each : two) {
    EXPECT_TRUE(absl::StartsWith(each["text"].get<std::string>(), prompt_text)) << each;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(each["logprobs"]["token_logprobs"][i], logprobs["token_logprobs"][i]) << i;
    }
  }

  // Echo without logprobs is the text alone; a text prompt echoes as the client wrote it.
  json text_body = {{"model", kModel},
                    {"prompt", "Once upon"},
                    {"max_tokens", 2},
                    {"temperature", 0},
                    {"echo", true}};
  testing::HttpResponse text_answer = Post("/v1/completions", text_body);
  ASSERT_EQ(text_answer.status, 200) << text_answer.body;
  const json text_choice = Parse(text_answer.body)["choices"][0];
  EXPECT_TRUE(absl::StartsWith(text_choice["text"].get<std::string>(), "Once upon")) << text_choice;
  EXPECT_TRUE(text_choice["logprobs"].is_null());
  // Offsets count the echoed text: the answer's first token starts where the prompt ends.
  text_body["logprobs"] = 0;
  testing::HttpResponse offsets = Post("/v1/completions", text_body);
  ASSERT_EQ(offsets.status, 200) << offsets.body;
  const json offset_choice = Parse(offsets.body)["choices"][0];
  const json& offset_list = offset_choice["logprobs"]["text_offset"];
  const size_t prompt_length = offset_list.size() - 2;  // 2 tokens generated
  EXPECT_EQ(offset_list[prompt_length], std::string("Once upon").size()) << offset_choice;
  text_body.erase("logprobs");
  text_body["max_tokens"] = 0;  // the echo alone
  testing::HttpResponse echo_only = Post("/v1/completions", text_body);
  ASSERT_EQ(echo_only.status, 200) << echo_only.body;
  const json echo_choice = Parse(echo_only.body)["choices"][0];
  EXPECT_EQ(echo_choice["text"], "Once upon");
  EXPECT_TRUE(echo_choice["logprobs"].is_null());
  EXPECT_EQ(echo_choice["finish_reason"], "length");

  // gRPC: a request that generates nothing sends its scores in a chunk before Complete.
  grpc_request.mutable_sampling()->set_max_new_tokens(0);
  StreamResult only = client.Generate(grpc_request);
  ASSERT_TRUE(only.status.ok()) << only.status.error_message();
  EXPECT_TRUE(only.tokens.empty());
  EXPECT_EQ(only.prompt_logprobs_chunk, 0);
  ASSERT_EQ(only.prompt_logprobs.size(), expected.prompt_logprobs.size());
  for (size_t i = 0; i < only.prompt_logprobs.size(); ++i) {
    EXPECT_EQ(only.prompt_logprobs[i].logprob(), expected.prompt_logprobs[i].logprob()) << i;
  }
  EXPECT_EQ(only.complete.finish_reason(), v1::LENGTH);
  EXPECT_EQ(only.complete.usage().completion_tokens(), 0);
}

// A list of prompts: prompt i's choices are numbered from i × n, each the answer of a call for
// that prompt alone; the usage counts every prompt; an echo starts each choice with its own
// prompt; a bad prompt is named by its place.
TEST_F(OpenAiApiTest, AListOfPromptsAnswersEachInTurn) {
  const std::vector<int32_t> first = testing::Tokens(10, 4, 1024);
  const std::vector<int32_t> second = testing::Tokens(14, 5, 1024);
  auto alone = [&](const std::vector<int32_t>& ids) {
    json body = {{"model", kModel},
                 {"prompt", ids},
                 {"max_tokens", 4},
                 {"temperature", 0},
                 {"ignore_eos", true}};
    testing::HttpResponse response = Post("/v1/completions", body);
    EXPECT_EQ(response.status, 200) << response.body;
    return Parse(response.body)["choices"][0]["text"].get<std::string>();
  };
  const std::string first_text = alone(first);
  const std::string second_text = alone(second);
  // Otherwise choices given the wrong prompt would pass: then pick other prompts.
  ASSERT_NE(first_text, second_text);
  json body = {{"model", kModel},  {"prompt", {first, second}}, {"max_tokens", 4},
               {"temperature", 0}, {"ignore_eos", true},        {"n", 2}};
  testing::HttpResponse response = Post("/v1/completions", body);
  ASSERT_EQ(response.status, 200) << response.body;
  const json answer = Parse(response.body);
  ASSERT_EQ(answer["choices"].size(), 4u) << answer;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(answer["choices"][i]["index"], i);
    EXPECT_EQ(answer["choices"][i]["text"], i < 2 ? first_text : second_text) << i;
  }
  EXPECT_EQ(answer["usage"]["prompt_tokens"], first.size() + second.size());
  EXPECT_EQ(answer["usage"]["completion_tokens"], 16);

  // Streamed: every chunk names its choice, and the texts add up per choice.
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  testing::HttpResponse streamed = Post("/v1/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  bool done = false;
  std::vector<std::string> texts(4);
  json usage;
  for (const json& event : SseEvents(streamed.body, &done)) {
    if (event["choices"].empty()) {
      usage = event["usage"];
      continue;
    }
    const json& delta = event["choices"][0];
    texts.at(delta["index"].get<size_t>()) += delta["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(texts[i], i < 2 ? first_text : second_text) << i;
  EXPECT_EQ(usage["prompt_tokens"], first.size() + second.size());

  // Echo: each choice starts with its own prompt.
  json echo = {{"model", kModel}, {"prompt", {first, second}},
               {"max_tokens", 0}, {"echo", true},
               {"logprobs", 0},   {"n", 2}};
  testing::HttpResponse echoed = Post("/v1/completions", echo);
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  const json echo_answer = Parse(echoed.body);
  ASSERT_EQ(echo_answer["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const std::vector<int32_t>& prompt = i < 2 ? first : second;
    EXPECT_EQ(echo_answer["choices"][i]["text"], model_->tokenizer->Decode(prompt, true)) << i;
    EXPECT_EQ(echo_answer["choices"][i]["logprobs"]["tokens"].size(), prompt.size()) << i;
  }
  EXPECT_EQ(echo_answer["usage"]["prompt_tokens"], first.size() + second.size());

  // A bad prompt in the list is named by its place.
  json bad = {{"model", kModel}, {"prompt", {first, {1, 2, 999999}}}, {"max_tokens", 2}};
  testing::HttpResponse refused = Post("/v1/completions", bad);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(Parse(refused.body)["error"]["param"], "prompt[1][2]") << refused.body;

  // A list holds at most 16 × --max-prompt-tokens tokens in all.
  ServerConfig config;
  config.limits.max_prompt_tokens = 8;
  Start(config);
  json many = json::array();
  for (int i = 0; i < 16; ++i) many.push_back(testing::Tokens(8, 20 + i, 1024));
  json within = {{"model", kModel}, {"prompt", many}, {"max_tokens", 1}};
  testing::HttpResponse fits = Post("/v1/completions", within);
  ASSERT_EQ(fits.status, 200) << fits.body;
  EXPECT_EQ(Parse(fits.body)["choices"].size(), 16u);
  many.push_back(testing::Tokens(1, 40, 1024));
  within["prompt"] = many;
  testing::HttpResponse over = Post("/v1/completions", within);
  EXPECT_EQ(over.status, 400) << over.body;
  EXPECT_TRUE(absl::StrContains(over.body, "the list's prompts hold more than 128 tokens"))
      << over.body;
}

// A forced call comes back as OpenAI's tool_calls, whole and streamed alike; without a forced
// choice the fixture model (which was never taught tools) answers in text.
TEST_F(OpenAiApiTest, AForcedToolCallComesBackAsToolCalls) {
  tool_call_format_ = ToolCallFormat::kHermes;
  Start(ServerConfig());
  json body = ChatBody("What is the weather in Oslo?", 200);
  body["tools"] = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer",
      "enum": [1, 2, 3]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "now"}}])");
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  body["parallel_tool_calls"] = false;
  testing::HttpResponse whole = Post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = Parse(whole.body);
  const json& choice = answer["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << whole.body;
  EXPECT_TRUE(choice["message"]["content"].is_null()) << whole.body;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << whole.body;
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_TRUE(absl::StartsWith(call["id"].get<std::string>(), "call_")) << call;
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  const json arguments = Parse(call["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(arguments.is_object());
  ASSERT_TRUE(arguments.contains("city"));
  EXPECT_TRUE(arguments["city"].is_string());
  EXPECT_LE(arguments.size(), 2u);

  body["stream"] = true;
  testing::HttpResponse streamed = Post("/v1/chat/completions", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  bool done = false;
  std::vector<json> calls;
  std::string content;
  std::vector<json> events = SseEvents(streamed.body, &done);
  EXPECT_TRUE(done);
  for (const json& event : events) {
    const json& delta = event["choices"][0]["delta"];
    content += delta.value("content", "");
    if (delta.contains("tool_calls")) {
      for (const json& c : delta["tool_calls"]) calls.push_back(c);
    }
  }
  EXPECT_EQ(content, "");
  ASSERT_EQ(calls.size(), 1u) << streamed.body;
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"], call["function"]);  // greedy: the same call
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "tool_calls");

  // The second request with these tools found their grammar compiled.
  EXPECT_EQ(server_->state().grammars().hits(), 1);
  const std::string scrape = Scrape();
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_grammar_cache_hits_total 1\n")) << scrape;
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_grammar_compiles_total 1\n")) << scrape;
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_grammar_cache_entries 1\n")) << scrape;

  // gRPC's Chat, asked the same, makes the same call (these properties are in name order, the
  // order a Struct gives gRPC's tools).
  v1::ChatRequest grpc_request = GrpcChat("What is the weather in Oslo?", 200);
  for (const json& tool : body["tools"]) {
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(tool.dump(), grpc_request.add_tools()).ok());
  }
  grpc_request.mutable_tool_choice()->set_function("get_weather");
  grpc_request.set_parallel_tool_calls(false);
  Client client(server_->port());
  StreamResult grpc_answer = client.Chat(grpc_request);
  ASSERT_TRUE(grpc_answer.status.ok()) << grpc_answer.status.error_message();
  ASSERT_EQ(grpc_answer.tool_calls.size(), 1u);
  EXPECT_EQ(grpc_answer.tool_calls[0].name(), "get_weather");
  EXPECT_EQ(grpc_answer.tool_calls[0].arguments(), call["function"]["arguments"]);
  EXPECT_EQ(grpc_answer.complete.finish_reason(), v1::TOOL_CALLS);

  // "required": any of the tools.
  body["stream"] = false;
  body["tool_choice"] = "required";
  testing::HttpResponse required = Post("/v1/chat/completions", body);
  ASSERT_EQ(required.status, 200) << required.body;
  const json message = Parse(required.body)["choices"][0]["message"];
  ASSERT_EQ(message["tool_calls"].size(), 1u) << required.body;
  const std::string name = message["tool_calls"][0]["function"]["name"];
  EXPECT_TRUE(name == "get_weather" || name == "now") << name;

  // "auto" (the default with tools): the model's own text, which holds no call.
  body.erase("tool_choice");
  body["max_tokens"] = 8;
  testing::HttpResponse automatic = Post("/v1/chat/completions", body);
  ASSERT_EQ(automatic.status, 200) << automatic.body;
  const json text = Parse(automatic.body)["choices"][0];
  EXPECT_TRUE(text["message"]["content"].is_string()) << automatic.body;
  EXPECT_FALSE(text["message"].contains("tool_calls"));
  EXPECT_NE(text["finish_reason"], "tool_calls");

  // A schema structured output cannot enforce is refused, naming the tool.
  body["tool_choice"] = "required";
  body["tools"][1]["function"]["parameters"] = {
      {"type", "object"}, {"properties", {{"t", {{"type", "integer"}, {"multipleOf", 2}}}}}};
  testing::HttpResponse refused = Post("/v1/chat/completions", body);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_TRUE(absl::StrContains(refused.body, "tools[1].function.parameters")) << refused.body;
}

TEST_F(OpenAiApiTest, ModelsListsTheServedModel) {
  testing::HttpResponse models = testing::HttpGet(endpoint_->port(), "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  json list = Parse(models.body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], kModel);
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_EQ(testing::HttpGet(endpoint_->port(), "/v1/models/zamba2-tiny").status, 200);
  EXPECT_EQ(testing::HttpGet(endpoint_->port(), "/v1/models/gpt-4").status, 404);
  EXPECT_EQ(testing::HttpGet(endpoint_->port(), "/v2/nothing").status, 404);
}

TEST_F(OpenAiApiTest, BadRequestsGetOpenAiErrorsNamingTheParameter) {
  struct Case {
    std::string body;
    int status;
    std::string param;    // "" for null
    std::string message;  // a part of it
  };
  json n2 = ChatBody("hi", 4);
  n2["n"] = 65;
  json logprobs = ChatBody("hi", 4);
  logprobs["logprobs"] = true;
  logprobs["top_logprobs"] = 30;
  json unknown = ChatBody("hi", 4);
  unknown["frobnicate"] = 1;
  json wrong_model = ChatBody("hi", 4);
  wrong_model["model"] = "gpt-4o";
  json too_many = ChatBody("hi", 100000000);
  json bad_top_p = ChatBody("hi", 4);
  bad_top_p["top_p"] = 1.5;
  json image = ChatBody("hi", 4);
  image["messages"][1]["content"] = {{{"type", "image_url"}, {"image_url", "x"}}};
  const std::vector<Case> cases = {
      {"{\"model\": ", 400, "", "not JSON"},
      {"[1, 2]", 400, "", "must be a JSON object"},
      {wrong_model.dump(), 404, "model", "'gpt-4o' is not served here"},
      {n2.dump(), 400, "n", "must be in [1, 64], got 65"},
      {json{{"model", kModel}}.dump(), 400, "messages", "required"},
      {logprobs.dump(), 400, "top_logprobs", "must be in [0, 20]"},
      {unknown.dump(), 400, "frobnicate", "unknown parameter"},
      {too_many.dump(), 400, "max_tokens", "must be in [1, "},
      {bad_top_p.dump(), 400, "top_p", "must be in (0, 1], got 1.5"},
      {image.dump(), 400, "messages[1].content[0].type", "\"image_url\" parts are not supported"},
      {std::string(200, '[') + std::string(200, ']'), 400, "", "deeper than 64"},
  };
  for (const Case& c : cases) {
    testing::HttpResponse response = HttpPost(endpoint_->port(), "/v1/chat/completions", c.body);
    EXPECT_EQ(response.status, c.status) << c.body << " -> " << response.body;
    json error = Parse(response.body)["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << response.body;
    EXPECT_EQ(error["param"], c.param.empty() ? json(nullptr) : json(c.param)) << response.body;
    EXPECT_TRUE(absl::StrContains(error["message"].get<std::string>(), c.message)) << response.body;
  }
  // A list of prompts of two kinds, and a body over the cap.
  testing::HttpResponse mixed =
      Post("/v1/completions",
           {{"model", kModel}, {"prompt", json::array({json("a"), json::array({1, 2})})}});
  EXPECT_EQ(mixed.status, 400);
  EXPECT_EQ(Parse(mixed.body)["error"]["param"], "prompt[1]") << mixed.body;
  testing::HttpResponse large =
      Post("/v1/completions", {{"model", kModel}, {"prompt", std::string(9000, 'x')}});
  EXPECT_EQ(large.status, 413);
  EXPECT_TRUE(absl::StrContains(Parse(large.body)["error"]["message"].get<std::string>(),
                                "more than the server's limit of 8192"))
      << large.body;
  const std::string scrape = Scrape();
  EXPECT_TRUE(absl::StrContains(
      scrape, "tandem_requests_total{code=\"INVALID_ARGUMENT\",rpc=\"ChatCompletions\"} 10"))
      << scrape;
}

// The slot goes back when the answer's end is taken from the engine, before it is written: a
// client that sends its next request as soon as it has read an answer is never refused.
TEST_F(OpenAiApiTest, OneStreamSlotServesBackToBackRequests) {
  ServerConfig config;
  config.limits.max_concurrent_streams = 1;
  Start(config);
  for (int i = 0; i < 20; ++i) {
    json body = ChatBody("hi", 2);
    body["stream"] = (i % 2 == 1);
    testing::HttpResponse response = Post("/v1/chat/completions", body);
    ASSERT_EQ(response.status, 200) << "request " << i << ": " << response.body;
  }
}

TEST_F(OpenAiApiTest, CallsNeedTheBearerToken) {
  ServerConfig config;
  config.security.tokens = *BearerTokens::Single("s3cret-token");
  Start(config);
  const int port = endpoint_->port();
  for (const std::string& headers :
       {std::string(), std::string("Authorization: Bearer wrong-token\r\n")}) {
    testing::HttpResponse response =
        HttpPost(port, "/v1/chat/completions", ChatBody("hi", 2).dump(), headers);
    EXPECT_EQ(response.status, 401) << response.body;
    json error = Parse(response.body)["error"];
    EXPECT_EQ(error["code"], "invalid_api_key") << response.body;
    EXPECT_EQ(testing::HttpGet(port, "/v1/models", headers).status, 401);
  }
  const std::string token = "Authorization: Bearer s3cret-token\r\n";
  EXPECT_EQ(HttpPost(port, "/v1/chat/completions", ChatBody("hi", 2).dump(), token).status, 200);
  EXPECT_EQ(testing::HttpGet(port, "/v1/models", token).status, 200);
  EXPECT_EQ(testing::HttpGet(port, "/health").status, 200);  // probes send no token
}

TEST_F(OpenAiApiTest, AClientThatHangsUpMidStreamHasItsRequestCancelled) {
  ASSERT_NO_FATAL_FAILURE(StreamLongChatAndHangUp(1));
  // Another request is served meanwhile, and the abandoned one is cancelled.
  testing::HttpResponse other = Post("/v1/chat/completions", ChatBody("Say hi.", 4));
  EXPECT_EQ(other.status, 200) << other.body;
  Client client(server_->port());
  EXPECT_TRUE(Eventually([&] { return client.ServerInfo().cancelled_requests() == 1; }));
  EXPECT_TRUE(Eventually([&] {
    const std::string scrape = Scrape();
    return absl::StrContains(scrape, "tandem_requests_finished_total{reason=\"cancelled\"} 1") &&
           absl::StrContains(scrape,
                             "tandem_requests_total{code=\"CANCELLED\",rpc=\"ChatCompletions\"} 1");
  })) << Scrape();
  EXPECT_EQ(server_->state().active_streams(), 0);
}

// Every choice of an abandoned call is cancelled, and every slot comes back.
TEST_F(OpenAiApiTest, AClientThatHangsUpCancelsEveryChoice) {
  ASSERT_NO_FATAL_FAILURE(StreamLongChatAndHangUp(3));
  Client client(server_->port());
  EXPECT_TRUE(Eventually([&] { return client.ServerInfo().cancelled_requests() == 3; }));
  EXPECT_TRUE(Eventually([&] {
    const std::string scrape = Scrape();
    return absl::StrContains(scrape, "tandem_requests_finished_total{reason=\"cancelled\"} 3") &&
           absl::StrContains(scrape,
                             "tandem_requests_total{code=\"CANCELLED\",rpc=\"ChatCompletions\"} 1");
  })) << Scrape();
  EXPECT_TRUE(Eventually([&] { return server_->state().active_streams() == 0; }));
}

TEST_F(OpenAiApiTest, AClientThatHangsUpBeforeAWholeAnswerHasItsRequestCancelled) {
  json body = ChatBody("Tell a long story.", 20000);
  body["ignore_eos"] = true;
  const int fd = SendRaw(body);
  ASSERT_GE(fd, 0);
  Client client(server_->port());
  ASSERT_TRUE(Eventually([&] { return client.ServerInfo().generated_tokens() > 2; }));
  close(fd);
  EXPECT_TRUE(Eventually([&] { return client.ServerInfo().cancelled_requests() == 1; }));
  EXPECT_TRUE(Eventually([&] { return server_->state().active_streams() == 0; }));
}

TEST_F(OpenAiApiTest, ServesHttpsWithTheServersCertificate) {
  absl::StatusOr<std::shared_ptr<TlsContext>> tls =
      TlsContext::Load(testing::Fixture("tls/server.crt"), testing::Fixture("tls/server.key"));
  ASSERT_TRUE(tls.ok()) << tls.status();
  OpenAiEndpointOptions options;
  options.model_name = kModel;
  options.tls = *tls;
  absl::StatusOr<std::unique_ptr<OpenAiEndpoint>> https =
      OpenAiEndpoint::Start(server_->state(), options);
  ASSERT_TRUE(https.ok()) << https.status();
  testing::HttpResponse models =
      testing::HttpsGet((*https)->port(), "/v1/models", testing::Fixture("tls/server.crt"));
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(Parse(models.body)["data"][0]["id"], kModel);
}

TEST_F(OpenAiApiTest, ADrainLetsRequestsInFlightFinish) {
  json body = ChatBody("Tell a story.", 300);
  body["ignore_eos"] = true;
  std::future<testing::HttpResponse> answer =
      std::async(std::launch::async, [&] { return Post("/v1/chat/completions", body); });
  ASSERT_TRUE(Eventually([&] { return server_->state().active_streams() == 1; }));
  server_->Shutdown(std::chrono::seconds(60));
  testing::HttpResponse response = answer.get();
  ASSERT_EQ(response.status, 200) << response.body;
  json finished = Parse(response.body);
  EXPECT_EQ(finished["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(finished["usage"]["completion_tokens"], 300);
}

TEST_F(OpenAiApiTest, AConnectionCarriesSeveralRequests) {
  const std::string body = ChatBody("hi", 2).dump();
  const std::string post =
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  testing::HttpResponse response = testing::HttpExchange(
      endpoint_->port(), post + "GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(response.status, 200);
  EXPECT_TRUE(absl::StrContains(response.head, "Connection: keep-alive")) << response.head;
  EXPECT_TRUE(absl::StrContains(response.body, "\"chat.completion\"")) << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "Connection: close")) << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "\"object\":\"list\"")) << response.body;
}

TEST_F(OpenAiApiTest, HealthTurnsUnavailableWhileDraining) {
  EXPECT_EQ(testing::HttpGet(endpoint_->port(), "/health").status, 200);
  server_->Shutdown(std::chrono::milliseconds(0));
  EXPECT_EQ(testing::HttpGet(endpoint_->port(), "/health").status, 503);
  testing::HttpResponse refused = Post("/v1/chat/completions", ChatBody("hi", 2));
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(Parse(refused.body)["error"]["type"], "server_error") << refused.body;
}

}  // namespace
}  // namespace tandem::server
