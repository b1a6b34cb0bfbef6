// Bad requests and exhausted limits: each gets its precise status code and a message naming
// the field, and the server keeps serving.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using testing::Client;
using testing::Eventually;
using testing::GreedyIds;
using testing::LoadServedFixture;
using testing::SmallServerConfig;
using testing::StreamResult;
using testing::Tokens;

struct BadGenerate {
  const char* name;
  std::function<void(v1::GenerateRequest&)> mutate;
  grpc::StatusCode code;
  const char* field;  // must appear in the message
};

struct BadChat {
  const char* name;
  std::function<void(v1::ChatRequest&)> mutate;
  grpc::StatusCode code;
  const char* field;
};

class ErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LoadServedFixture().release();
    ASSERT_NE(model_, nullptr);
    auto server = GrpcServer::Start(*model_, SmallServerConfig());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  void SetUp() override { client_ = std::make_unique<Client>(server_->port()); }

  static ServedModel* model_;
  static GrpcServer* server_;
  std::unique_ptr<Client> client_;
};

ServedModel* ErrorsTest::model_ = nullptr;
GrpcServer* ErrorsTest::server_ = nullptr;

constexpr auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;

TEST_F(ErrorsTest, BadGenerateRequestsGetPreciseErrors) {
  const float nan = std::nanf("");
  const std::vector<BadGenerate> table = {
      {"no prompt", [](auto& r) { r.clear_token_ids(); }, kInvalid, "prompt"},
      {"empty text", [](auto& r) { r.set_text(""); }, kInvalid, "text"},
      {"invalid UTF-8", [](auto& r) { r.set_text("ok \xff\xfe"); }, kInvalid, "text"},
      {"truncated UTF-8", [](auto& r) { r.set_text("caf\xc3"); }, kInvalid, "text"},
      {"oversized text", [](auto& r) { r.set_text(std::string(5000, 'a')); }, kInvalid, "text"},
      {"empty token ids", [](auto& r) { r.mutable_token_ids()->clear_ids(); }, kInvalid,
       "token_ids.ids"},
      {"token id too large", [](auto& r) { r.mutable_token_ids()->set_ids(1, 1 << 20); }, kInvalid,
       "token_ids.ids[1]"},
      {"negative token id", [](auto& r) { r.mutable_token_ids()->set_ids(0, -3); }, kInvalid,
       "token_ids.ids[0]"},
      {"too many prompt tokens",
       [](auto& r) {
         for (int i = 0; i < 600; ++i) r.mutable_token_ids()->add_ids(5);
       },
       kInvalid, "token_ids.ids"},
      {"negative temperature", [](auto& r) { r.mutable_sampling()->set_temperature(-1); }, kInvalid,
       "sampling.temperature"},
      {"NaN temperature", [nan](auto& r) { r.mutable_sampling()->set_temperature(nan); }, kInvalid,
       "sampling.temperature"},
      {"top_p zero", [](auto& r) { r.mutable_sampling()->set_top_p(0); }, kInvalid,
       "sampling.top_p"},
      {"top_p above one", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }, kInvalid,
       "sampling.top_p"},
      {"negative top_k", [](auto& r) { r.mutable_sampling()->set_top_k(-1); }, kInvalid,
       "sampling.top_k"},
      {"min_p above one", [](auto& r) { r.mutable_sampling()->set_min_p(2); }, kInvalid,
       "sampling.min_p"},
      {"logit_bias of a token outside the vocabulary",
       [](auto& r) { (*r.mutable_sampling()->mutable_logit_bias())[1 << 30] = 1; }, kInvalid,
       "sampling.logit_bias[1073741824]: not a token id: must be in [0, "},
      {"logit_bias above 100",
       [](auto& r) { (*r.mutable_sampling()->mutable_logit_bias())[3] = 150; }, kInvalid,
       "sampling.logit_bias[3]: must be in [-100, 100], got 150"},
      {"zero repetition penalty", [](auto& r) { r.mutable_sampling()->set_repetition_penalty(0); },
       kInvalid, "sampling.repetition_penalty"},
      {"presence penalty out of range",
       [](auto& r) { r.mutable_sampling()->set_presence_penalty(3); }, kInvalid,
       "sampling.presence_penalty"},
      {"frequency penalty NaN",
       [nan](auto& r) { r.mutable_sampling()->set_frequency_penalty(nan); }, kInvalid,
       "sampling.frequency_penalty"},
      {"zero max_new_tokens", [](auto& r) { r.mutable_sampling()->set_max_new_tokens(0); },
       kInvalid, "sampling.max_new_tokens"},
      {"max_new_tokens above the limit",
       [](auto& r) { r.mutable_sampling()->set_max_new_tokens(5000); }, kInvalid,
       "sampling.max_new_tokens"},
      {"top_logprobs above 20", [](auto& r) { r.mutable_sampling()->set_top_logprobs(21); },
       kInvalid, "sampling.top_logprobs"},
      {"stop token out of range", [](auto& r) { r.mutable_sampling()->add_stop_token_ids(-1); },
       kInvalid, "sampling.stop_token_ids[0]"},
      {"empty stop string", [](auto& r) { r.mutable_sampling()->add_stop_strings(""); }, kInvalid,
       "stop_strings[0]"},
      {"stop string not UTF-8", [](auto& r) { r.mutable_sampling()->add_stop_strings("\xc0"); },
       kInvalid, "stop_strings[0]"},
      {"json_schema keyword tandem cannot enforce",
       [](auto& r) {
         r.mutable_sampling()->set_json_schema(R"({"type": "integer", "multipleOf": 3})");
       },
       kInvalid, "sampling.json_schema: json_schema at #: keyword 'multipleOf' is not supported"},
      {"json_schema not JSON", [](auto& r) { r.mutable_sampling()->set_json_schema("{type"); },
       kInvalid, "sampling.json_schema: json_schema: not valid JSON"},
      {"json_object false", [](auto& r) { r.mutable_sampling()->set_json_object(false); }, kInvalid,
       "sampling.json_object: only true"},
      {"request id with a space", [](auto& r) { r.set_request_id("a b"); }, kInvalid, "request_id"},
      {"request id too long", [](auto& r) { r.set_request_id(std::string(200, 'x')); }, kInvalid,
       "request_id"},
  };
  for (const BadGenerate& row : table) {
    v1::GenerateRequest request = GreedyIds({5, 6, 7, 8}, 4);
    row.mutate(request);
    StreamResult got = client_->Generate(request);
    EXPECT_EQ(got.status.error_code(), row.code) << row.name << ": " << got.status.error_message();
    EXPECT_NE(got.status.error_message().find(row.field), std::string::npos)
        << row.name << ": '" << got.status.error_message() << "' does not name " << row.field;
    EXPECT_EQ(got.chunks, 0) << row.name;
  }
  // None of it disturbed the server.
  StreamResult ok = client_->Generate(GreedyIds({5, 6, 7, 8}, 4));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens.size(), 4u);
}

TEST_F(ErrorsTest, BadChatRequestsGetPreciseErrors) {
  const std::vector<BadChat> table = {
      {"no messages", [](auto& r) { r.clear_messages(); }, kInvalid, "messages"},
      {"unknown role", [](auto& r) { r.mutable_messages(0)->set_role("wizard"); }, kInvalid,
       "messages[0].role"},
      {"empty role", [](auto& r) { r.mutable_messages(0)->set_role(""); }, kInvalid,
       "messages[0].role"},
      {"content not UTF-8",
       [](auto& r) {
         auto* m = r.add_messages();
         m->set_role("assistant");
         m->set_content("\xed\xa0\x80");  // a UTF-16 surrogate encoded in UTF-8
       },
       kInvalid, "messages[1].content"},
      {"content over the byte limit",
       [](auto& r) { r.mutable_messages(0)->set_content(std::string(5000, 'a')); }, kInvalid,
       "messages[0].content"},
      {"bad sampling", [](auto& r) { r.mutable_sampling()->set_top_p(-1); }, kInvalid,
       "sampling.top_p"},
  };
  for (const BadChat& row : table) {
    v1::ChatRequest request;
    auto* m = request.add_messages();
    m->set_role("user");
    m->set_content("hi");
    request.mutable_sampling()->set_max_new_tokens(2);
    row.mutate(request);
    StreamResult got = client_->Chat(request);
    EXPECT_EQ(got.status.error_code(), row.code) << row.name << ": " << got.status.error_message();
    EXPECT_NE(got.status.error_message().find(row.field), std::string::npos)
        << row.name << ": '" << got.status.error_message() << "' does not name " << row.field;
  }
}

TEST_F(ErrorsTest, BadTokenizerCallsGetPreciseErrors) {
  grpc::ClientContext tc;
  v1::TokenizeRequest treq;
  treq.set_text("\xff");
  v1::TokenizeResponse tres;
  grpc::Status status = client_->stub().Tokenize(&tc, treq, &tres);
  EXPECT_EQ(status.error_code(), kInvalid);
  EXPECT_NE(status.error_message().find("text"), std::string::npos);

  // Text that tokenizes into more tokens than any prompt may hold is refused, like a prompt.
  grpc::ClientContext lc;
  v1::TokenizeRequest long_text;
  std::string words;
  while (words.size() + 4 < 4000) words += "a b ";  // within max_request_bytes (4096)
  long_text.set_text(words);
  status = client_->stub().Tokenize(&lc, long_text, &tres);
  EXPECT_EQ(status.error_code(), kInvalid);
  EXPECT_NE(status.error_message().find("tokens, more than the server's limit of 512"),
            std::string::npos)
      << status.error_message();

  grpc::ClientContext dc;
  v1::DetokenizeRequest dreq;
  dreq.add_token_ids(5);
  dreq.add_token_ids(99999);
  v1::DetokenizeResponse dres;
  status = client_->stub().Detokenize(&dc, dreq, &dres);
  EXPECT_EQ(status.error_code(), kInvalid);
  EXPECT_NE(status.error_message().find("token_ids[1]"), std::string::npos)
      << status.error_message();
}

// Limits that need a server of their own.
TEST(LimitsTest, TextTooLongForAnyPromptIsRefusedBeforeTokenizing) {
  auto model = LoadServedFixture();
  ASSERT_NE(model, nullptr);
  ASSERT_GT(model->longest_token_bytes, 0u);
  ServerConfig config = SmallServerConfig();
  config.limits.max_prompt_tokens = 8;
  config.limits.max_request_bytes = 1 << 20;
  auto server = GrpcServer::Start(*model, config);
  ASSERT_TRUE(server.ok()) << server.status();
  Client client((*server)->port());
  // More bytes than 8 tokens of the longest vocabulary entry can hold, twice over.
  const std::string text(8 * 2 * model->longest_token_bytes + 1, 'x');
  grpc::ClientContext context;
  v1::TokenizeRequest request;
  request.set_text(text);
  v1::TokenizeResponse response;
  grpc::Status status = client.stub().Tokenize(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(
      status.error_message().find("which is more than the server's limit of 8 tokens can hold"),
      std::string::npos)
      << status.error_message();
  v1::GenerateRequest generate;
  generate.set_text(text);
  StreamResult refused = client.Generate(generate);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.status.error_message().find("text: "), std::string::npos);
}

TEST(LimitsTest, PromptLargerThanTheMemoryCanEverHoldIsResourceExhausted) {
  auto model = LoadServedFixture();
  ASSERT_NE(model, nullptr);
  ServerConfig config = SmallServerConfig();
  config.engine.memory_bytes = 4 << 20;
  config.limits.max_prompt_tokens = 1 << 20;
  config.limits.max_request_bytes = 1 << 22;
  auto server = GrpcServer::Start(*model, config);
  ASSERT_TRUE(server.ok()) << server.status();
  const size_t page_bytes = model->model->layout().kv_page_bytes();
  ASSERT_GT(page_bytes, 0u);
  const size_t tokens = (config.engine.memory_bytes / page_bytes + 2) * 16;
  Client client((*server)->port());
  StreamResult got =
      client.Generate(GreedyIds(Tokens(tokens, 1, model->model->config().vocab_size), 4));
  EXPECT_EQ(got.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << got.status.error_message();
  EXPECT_NE(got.status.error_message().find("prompt"), std::string::npos)
      << got.status.error_message();
}

TEST(LimitsTest, FullQueueIsResourceExhausted) {
  auto model = LoadServedFixture();
  ASSERT_NE(model, nullptr);
  ServerConfig config = SmallServerConfig();
  config.engine.scheduler.max_running = 1;
  config.engine.max_waiting = 1;
  auto server = GrpcServer::Start(*model, config);
  ASSERT_TRUE(server.ok()) << server.status();
  Client client((*server)->port());
  const int32_t vocab = model->model->config().vocab_size;

  // One request runs (the batch holds one), one waits: the queue is full.
  grpc::ClientContext running_context, waiting_context;
  auto running = client.stub().Generate(&running_context, GreedyIds(Tokens(8, 1, vocab), 4000));
  v1::GenerateResponse first;
  ASSERT_TRUE(running->Read(&first));
  auto waiting = client.stub().Generate(&waiting_context, GreedyIds(Tokens(8, 2, vocab), 4));
  ASSERT_TRUE(Eventually([&] { return client.ServerInfo().waiting_requests() == 1; }));

  StreamResult refused = client.Generate(GreedyIds(Tokens(8, 3, vocab), 4));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  EXPECT_NE(refused.status.error_message().find("queue"), std::string::npos);

  running_context.TryCancel();
  EXPECT_EQ(testing::ReadStream(*running).status.error_code(), grpc::StatusCode::CANCELLED);
  // The waiting request then runs to completion.
  StreamResult waited = testing::ReadStream(*waiting);
  EXPECT_TRUE(waited.status.ok()) << waited.status.error_message();
  EXPECT_EQ(waited.tokens.size(), 4u);
}

TEST(LimitsTest, ConcurrentStreamCapIsResourceExhausted) {
  auto model = LoadServedFixture();
  ASSERT_NE(model, nullptr);
  ServerConfig config = SmallServerConfig();
  config.limits.max_concurrent_streams = 1;
  auto server = GrpcServer::Start(*model, config);
  ASSERT_TRUE(server.ok()) << server.status();
  Client client((*server)->port());
  grpc::ClientContext context;
  auto open = client.stub().Generate(&context, GreedyIds({5, 6, 7}, 4000));
  v1::GenerateResponse first;
  ASSERT_TRUE(open->Read(&first));
  StreamResult refused = client.Generate(GreedyIds({5, 6, 7}, 4));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.status.error_message().find("concurrent streams"), std::string::npos)
      << refused.status.error_message();
  context.TryCancel();
  testing::ReadStream(*open);
  // The slot is given back once the stream is done.
  ASSERT_TRUE(Eventually([&] { return client.ServerInfo().active_streams() == 0; }));
  StreamResult ok = client.Generate(GreedyIds({5, 6, 7}, 4));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
}

TEST(LimitsTest, ChatWithoutATemplateIsFailedPrecondition) {
  auto model = LoadServedFixture("jamba-tiny");  // tokenizer.model, no tokenizer_config.json
  ASSERT_NE(model, nullptr);
  ASSERT_FALSE(model->chat_template.has_value());
  auto server = GrpcServer::Start(*model, SmallServerConfig());
  ASSERT_TRUE(server.ok()) << server.status();
  Client client((*server)->port());
  v1::ChatRequest request;
  auto* m = request.add_messages();
  m->set_role("user");
  m->set_content("hi");
  StreamResult got = client.Chat(request);
  EXPECT_EQ(got.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(got.status.error_message().find("chat template"), std::string::npos);
}

}  // namespace
}  // namespace tandem::server
