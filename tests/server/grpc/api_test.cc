// tandem.v1.Tandem through a real C++ gRPC client against an in-process server on loopback:
// streaming Generate and Chat against the engine's own output, the tokenizer calls, model and
// server information, Abort.
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

class ApiTest : public ::testing::Test {
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
    server_ = nullptr;
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<Client>(server_->port());
  }

  // What the engine itself generates for `request`, on an engine of its own over the same
  // model: the server must stream exactly this.
  static std::vector<int32_t> EngineOutput(engine::Request request) {
    auto engine =
        engine::Engine::Create(*model_->model, model_->tokenizer.get(), SmallServerConfig().engine);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {};
    auto stream = (*engine)->Submit(std::move(request));
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return {};
    std::vector<int32_t> tokens;
    engine::Event event;
    while ((*stream)->Next(&event))
      tokens.insert(tokens.end(), event.tokens.begin(), event.tokens.end());
    return tokens;
  }
  static engine::Request GreedyEngineRequest(std::vector<int32_t> prompt, int32_t max_new) {
    engine::Request r;
    r.prompt = std::move(prompt);
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    return r;
  }
  int32_t vocab() const { return model_->model->config().vocab_size; }

  static ServedModel* model_;
  static GrpcServer* server_;
  std::unique_ptr<Client> client_;
};

ServedModel* ApiTest::model_ = nullptr;
GrpcServer* ApiTest::server_ = nullptr;

TEST_F(ApiTest, GenerateStreamsTheEnginesGreedyOutput) {
  const std::vector<int32_t> prompt = Tokens(40, 7, vocab());
  const std::vector<int32_t> expected = EngineOutput(GreedyEngineRequest(prompt, 24));
  ASSERT_EQ(expected.size(), 24u);

  v1::GenerateRequest request = GreedyIds(prompt, 24);
  request.set_request_id("greedy-1");
  StreamResult got = client_->Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.request_id, "greedy-1");
  EXPECT_EQ(got.tokens, expected);
  EXPECT_GE(got.chunks, 1);
  ASSERT_TRUE(got.has_complete);
  EXPECT_EQ(got.complete.finish_reason(), v1::LENGTH);
  EXPECT_EQ(got.complete.usage().prompt_tokens(), 40);
  EXPECT_EQ(got.complete.usage().completion_tokens(), 24);
  EXPECT_LE(got.complete.usage().cached_tokens(), 40);
  EXPECT_GE(got.complete.timings().finished_seconds(),
            got.complete.timings().first_token_seconds());
  // The streamed text is the detokenized output.
  EXPECT_EQ(got.text, model_->tokenizer->Decode(expected, true));
}

TEST_F(ApiTest, SharedPrefixIsServedFromTheCacheWithTheSameTokens) {
  // Marconi keeps an SSM checkpoint where prompts branch: the second prompt's prefill saves
  // one at the end of the shared prefix, and the third restores it.
  const std::vector<int32_t> prefix = Tokens(64, 11, vocab());
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 3; ++i) {
    prompts.push_back(prefix);
    const std::vector<int32_t> suffix = Tokens(16, 100 + i, vocab());
    prompts.back().insert(prompts.back().end(), suffix.begin(), suffix.end());
  }
  StreamResult third;
  for (const auto& prompt : prompts) {
    third = client_->Generate(GreedyIds(prompt, 8));
    ASSERT_TRUE(third.status.ok()) << third.status.error_message();
  }
  EXPECT_GT(third.complete.usage().cached_tokens(), 0);
  EXPECT_LE(third.complete.usage().cached_tokens(), 64);
  // A cache hit generates what a miss does.
  EXPECT_EQ(third.tokens, EngineOutput(GreedyEngineRequest(prompts[2], 8)));
}

TEST_F(ApiTest, TextPromptIsTokenizedWithSpecialTokens) {
  grpc::ClientContext tc;
  v1::TokenizeRequest treq;
  treq.set_text("The quick brown fox");
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(client_->stub().Tokenize(&tc, treq, &tokens).ok());

  v1::GenerateRequest request;
  request.set_text("The quick brown fox");
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(6);
  request.mutable_sampling()->set_ignore_eos(true);
  StreamResult got = client_->Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.complete.usage().prompt_tokens(), tokens.token_ids_size());
  const std::vector<int32_t> ids(tokens.token_ids().begin(), tokens.token_ids().end());
  EXPECT_EQ(got.tokens, EngineOutput(GreedyEngineRequest(ids, 6)));
}

TEST_F(ApiTest, ChatRendersTheTemplateAndDoesNotAddSpecialTokensTwice) {
  v1::ChatRequest request;
  request.set_request_id("chat-1");
  auto* system = request.add_messages();
  system->set_role("system");
  system->set_content("You are terse.");
  auto* user = request.add_messages();
  user->set_role("user");
  user->set_content("Name a colour.");
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(10);
  request.mutable_sampling()->set_ignore_eos(true);

  // The prompt the server must build: the template's rendering, tokenized as it is.
  nlohmann::ordered_json context = {
      {"messages",
       {{{"role", "system"}, {"content", "You are terse."}},
        {{"role", "user"}, {"content", "Name a colour."}}}},
      {"add_generation_prompt", true},
      {"bos_token", model_->tokenizer->config().bos_token},
      {"eos_token", model_->tokenizer->config().eos_token},
  };
  auto rendered = model_->chat_template->Render(context);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_NE(rendered->find("<|im_start|>assistant\n"), std::string::npos);
  auto prompt = model_->tokenizer->Encode(*rendered, false);
  ASSERT_TRUE(prompt.ok());
  // One BOS, from the template; encoding with special tokens would have added a second.
  ASSERT_FALSE(prompt->empty());
  EXPECT_EQ((*prompt)[0], model_->tokenizer->bos_id());
  EXPECT_NE((*prompt)[1], model_->tokenizer->bos_id());

  StreamResult got = client_->Chat(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.request_id, "chat-1");
  EXPECT_EQ(got.complete.usage().prompt_tokens(), static_cast<int64_t>(prompt->size()));
  EXPECT_EQ(got.tokens, EngineOutput(GreedyEngineRequest(*prompt, 10)));
}

TEST_F(ApiTest, TokenizeDetokenizeRoundTrip) {
  const std::string text = "Hello world, this is tandem.";
  grpc::ClientContext tc;
  v1::TokenizeRequest treq;
  treq.set_text(text);
  treq.set_add_special_tokens(false);
  v1::TokenizeResponse tokens;
  grpc::Status status = client_->stub().Tokenize(&tc, treq, &tokens);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GT(tokens.token_ids_size(), 0);
  EXPECT_EQ(tokens.pieces_size(), tokens.token_ids_size());
  const std::vector<int32_t> ids(tokens.token_ids().begin(), tokens.token_ids().end());
  EXPECT_EQ(ids, *model_->tokenizer->Encode(text, false));

  grpc::ClientContext dc;
  v1::DetokenizeRequest dreq;
  *dreq.mutable_token_ids() = tokens.token_ids();
  v1::DetokenizeResponse back;
  status = client_->stub().Detokenize(&dc, dreq, &back);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(back.text(), text);

  // With special tokens: BOS first, and skipping it on the way back gives the text again.
  grpc::ClientContext tc2;
  treq.clear_add_special_tokens();
  v1::TokenizeResponse with_bos;
  ASSERT_TRUE(client_->stub().Tokenize(&tc2, treq, &with_bos).ok());
  EXPECT_EQ(with_bos.token_ids(0), model_->tokenizer->bos_id());
  grpc::ClientContext dc2;
  *dreq.mutable_token_ids() = with_bos.token_ids();
  ASSERT_TRUE(client_->stub().Detokenize(&dc2, dreq, &back).ok());
  EXPECT_EQ(back.text(), text);
}

TEST_F(ApiTest, ModelInfoDescribesTheCheckpoint) {
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(client_->stub().GetModelInfo(&context, {}, &info).ok());
  const models::ModelConfig& c = model_->model->config();
  EXPECT_EQ(info.architecture(), c.architecture);
  EXPECT_EQ(info.family(), "zamba2");
  EXPECT_EQ(info.vocab_size(), c.vocab_size);
  EXPECT_EQ(info.num_layers(), c.num_layers);
  EXPECT_EQ(info.num_attention_layers(), c.num_attention_layers);
  EXPECT_EQ(info.num_ssm_layers(), c.num_ssm_layers);
  EXPECT_TRUE(info.has_tokenizer());
  EXPECT_TRUE(info.has_chat_template());
  EXPECT_EQ(info.page_tokens(), 16);
  EXPECT_EQ(info.max_prompt_tokens(), 512);
  EXPECT_EQ(info.max_new_tokens_limit(), 4096);
  EXPECT_GT(info.weight_bytes(), 0);
  EXPECT_NE(info.model_path().find("zamba2-tiny"), std::string::npos);
  EXPECT_EQ(info.device(), "cpu");
  EXPECT_EQ(info.tensor_parallel(), 1);
}

TEST_F(ApiTest, ServerInfoCountsRequestsAndReportsPools) {
  const v1::ServerInfo before = client_->ServerInfo();
  StreamResult got = client_->Generate(GreedyIds(Tokens(20, 3, vocab()), 5));
  ASSERT_TRUE(got.status.ok());
  v1::ServerInfo after;
  // Stats are a snapshot taken after each engine step; the finishing step may still be ending.
  ASSERT_TRUE(Eventually([&] {
    after = client_->ServerInfo();
    return after.finished_requests() >= before.finished_requests() + 1;
  }));
  EXPECT_EQ(after.generated_tokens() - before.generated_tokens(), 5);
  EXPECT_EQ(after.prompt_tokens() - before.prompt_tokens(), 20);
  EXPECT_EQ(after.version(), "0.1.0");
  EXPECT_FALSE(after.draining());
  EXPECT_EQ(after.cache_policy(), "marconi");
  EXPECT_EQ(after.memory_budget_bytes(), 32 << 20);
  ASSERT_EQ(after.pools_size(), 2);
  EXPECT_EQ(after.pools(0).name(), "kv_page");
  EXPECT_EQ(after.pools(1).name(), "ssm_block");
  for (const v1::PoolInfo& pool : after.pools()) {
    EXPECT_GT(pool.unit_bytes(), 0);
    EXPECT_LE(pool.used_units(), pool.capacity_units());
  }
  EXPECT_GE(after.token_hit_rate(), 0.0);
  EXPECT_LE(after.token_hit_rate(), 1.0);
}

TEST_F(ApiTest, LogprobsComeWithEachToken) {
  v1::GenerateRequest request = GreedyIds(Tokens(12, 5, vocab()), 6);
  request.mutable_sampling()->set_top_logprobs(3);
  StreamResult got = client_->Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_EQ(got.logprobs.size(), got.tokens.size());
  for (size_t i = 0; i < got.tokens.size(); ++i) {
    EXPECT_EQ(got.logprobs[i].token_id(), got.tokens[i]);
    EXPECT_LE(got.logprobs[i].logprob(), 0.0f);
    ASSERT_EQ(got.logprobs[i].top_size(), 3);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(got.logprobs[i].top(0).token_id(), got.tokens[i]);
  }
}

TEST_F(ApiTest, StopTokenEndsGenerationAndIsReported) {
  const std::vector<int32_t> prompt = Tokens(16, 9, vocab());
  StreamResult free_run = client_->Generate(GreedyIds(prompt, 10));
  ASSERT_EQ(free_run.tokens.size(), 10u);
  const int32_t stop = free_run.tokens[3];
  v1::GenerateRequest request = GreedyIds(prompt, 10);
  request.mutable_sampling()->add_stop_token_ids(stop);
  StreamResult got = client_->Generate(request);
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.complete.finish_reason(), v1::STOP);
  EXPECT_EQ(got.complete.matched_token_id(), stop);
  ASSERT_FALSE(got.tokens.empty());
  EXPECT_EQ(got.tokens.back(), stop);
  EXPECT_LE(got.tokens.size(), 4u);
}

// A schema's answer over gRPC: the text is one of its values and the request ends there.
TEST_F(ApiTest, JsonSchemaConstrainsTheAnswerAndEndsIt) {
  v1::GenerateRequest request = GreedyIds(Tokens(16, 31, vocab()), 40);
  request.mutable_sampling()->set_json_schema(R"({"enum": ["yes", "no", [true, null]]})");
  StreamResult got = client_->Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.complete.finish_reason(), v1::STOP);
  const std::string answer = got.text.substr(got.text.find_first_not_of(" \n\t"));
  EXPECT_TRUE(answer == "\"yes\"" || answer == "\"no\"" || answer == "[true,null]") << got.text;
}

// logit_bias: a banned token never comes, a forced one always does; the logprobs stay the raw
// model's (the banned token may still be the likeliest).
TEST_F(ApiTest, LogitBiasBansAndForcesTokens) {
  const std::vector<int32_t> prompt = Tokens(14, 41, vocab());
  StreamResult free_run = client_->Generate(GreedyIds(prompt, 8));
  ASSERT_TRUE(free_run.status.ok()) << free_run.status.error_message();
  const int32_t first = free_run.tokens[0];

  v1::GenerateRequest banned = GreedyIds(prompt, 8);
  (*banned.mutable_sampling()->mutable_logit_bias())[first] = -100.0f;
  banned.mutable_sampling()->set_top_logprobs(1);
  StreamResult without = client_->Generate(banned);
  ASSERT_TRUE(without.status.ok()) << without.status.error_message();
  ASSERT_EQ(without.tokens.size(), 8u);
  for (int32_t t : without.tokens) EXPECT_NE(t, first);
  EXPECT_EQ(without.logprobs[0].top(0).token_id(), first);  // still the model's favourite

  v1::GenerateRequest forced = GreedyIds(prompt, 8);
  forced.mutable_sampling()->set_temperature(1.0f);  // sampled
  forced.mutable_sampling()->set_seed(5);
  (*forced.mutable_sampling()->mutable_logit_bias())[7] = 100.0f;
  StreamResult only = client_->Generate(forced);
  ASSERT_TRUE(only.status.ok()) << only.status.error_message();
  EXPECT_EQ(only.tokens, std::vector<int32_t>(8, 7));

  // Beside a schema the bias works among the tokens the schema allows.
  v1::GenerateRequest schema = GreedyIds(prompt, 20);
  schema.mutable_sampling()->set_json_schema(R"({"enum": ["yes", "no"]})");
  StreamResult plain = client_->Generate(schema);
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  ASSERT_FALSE(plain.tokens.empty());
  const int32_t chosen = plain.tokens[0];
  (*schema.mutable_sampling()->mutable_logit_bias())[chosen] = -100.0f;
  StreamResult other = client_->Generate(schema);
  ASSERT_TRUE(other.status.ok()) << other.status.error_message();
  ASSERT_FALSE(other.tokens.empty());
  EXPECT_NE(other.tokens[0], chosen);
  const std::string answer = other.text.substr(other.text.find_first_not_of(" \n\t"));
  EXPECT_TRUE(answer == "\"yes\"" || answer == "\"no\"") << other.text;
}

// A prediction (speculative decoding's drafts) changes how soon the output comes, never what it
// is; Usage and ServerInfo count the drafted tokens the model confirmed.
TEST_F(ApiTest, APredictionLeavesTheOutputAsItIs) {
  const std::vector<int32_t> prompt = Tokens(30, 43, vocab());
  v1::GenerateRequest request = GreedyIds(prompt, 24);
  request.mutable_sampling()->set_top_logprobs(2);
  const StreamResult plain = client_->Generate(request);
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  const int64_t confirmed_before = client_->ServerInfo().accepted_draft_tokens();

  request.set_prediction(plain.text);
  const StreamResult predicted = client_->Generate(request);
  ASSERT_TRUE(predicted.status.ok()) << predicted.status.error_message();
  EXPECT_EQ(predicted.tokens, plain.tokens);
  ASSERT_EQ(predicted.logprobs.size(), plain.logprobs.size());
  for (size_t i = 0; i < plain.logprobs.size(); ++i) {
    EXPECT_EQ(predicted.logprobs[i].SerializeAsString(), plain.logprobs[i].SerializeAsString());
  }
  const v1::Usage& usage = predicted.complete.usage();
  EXPECT_GT(usage.accepted_draft_tokens(), 0);
  EXPECT_EQ(usage.completion_tokens(), 24);
  EXPECT_EQ(plain.complete.usage().accepted_draft_tokens(), 0);
  // The engine publishes its counters after the step that finished the request.
  EXPECT_TRUE(Eventually([&] {
    return client_->ServerInfo().accepted_draft_tokens() ==
           confirmed_before + usage.accepted_draft_tokens();
  }));

  // A prediction the model disagrees with costs rejected drafts, not a different answer.
  const std::vector<int32_t> half(plain.tokens.begin(), plain.tokens.begin() + 12);
  request.set_prediction(model_->tokenizer->Decode(half, true) + " something else");
  const StreamResult wrong = client_->Generate(request);
  ASSERT_TRUE(wrong.status.ok()) << wrong.status.error_message();
  EXPECT_EQ(wrong.tokens, plain.tokens);

  // Predictions are text: not UTF-8 is refused by name.
  request.set_prediction("\xff\xfe");
  const StreamResult bad = client_->Generate(request);
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.status.error_message().find("prediction"), std::string::npos)
      << bad.status.error_message();
}

TEST_F(ApiTest, SeededSamplingIsReproducible) {
  v1::GenerateRequest request = GreedyIds(Tokens(12, 21, vocab()), 12);
  request.mutable_sampling()->set_temperature(1.5f);
  request.mutable_sampling()->set_top_p(0.9f);
  request.mutable_sampling()->set_seed(1234);
  StreamResult a = client_->Generate(request);
  StreamResult b = client_->Generate(request);
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 12u);
}

TEST_F(ApiTest, TinyTemperatureIsGreedy) {
  const std::vector<int32_t> prompt = Tokens(12, 23, vocab());
  v1::GenerateRequest request = GreedyIds(prompt, 8);
  request.mutable_sampling()->set_temperature(1e-30f);
  StreamResult got = client_->Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.tokens, EngineOutput(GreedyEngineRequest(prompt, 8)));
}

TEST_F(ApiTest, AbortStopsALiveRequestByItsId) {
  v1::GenerateRequest request = GreedyIds(Tokens(10, 2, vocab()), 4000);
  request.set_request_id("abort-me");
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, request);
  bool aborted = false;
  StreamResult got = testing::ReadStream(*reader, [&](const StreamResult&) {
    if (aborted) return;
    aborted = true;
    grpc::ClientContext ac;
    v1::AbortRequest abort;
    abort.set_request_id("abort-me");
    v1::AbortResponse response;
    ASSERT_TRUE(client_->stub().Abort(&ac, abort, &response).ok());
    EXPECT_TRUE(response.aborted());
  });
  EXPECT_TRUE(aborted);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_TRUE(got.has_complete);
  EXPECT_EQ(got.complete.finish_reason(), v1::ABORTED);
  EXPECT_LT(got.tokens.size(), 4000u);

  // Finished requests and unknown ids are not found.
  grpc::ClientContext ac;
  v1::AbortRequest abort;
  abort.set_request_id("abort-me");
  v1::AbortResponse response;
  ASSERT_TRUE(client_->stub().Abort(&ac, abort, &response).ok());
  EXPECT_FALSE(response.aborted());
}

TEST_F(ApiTest, ALiveRequestIdCannotBeReused) {
  v1::GenerateRequest request = GreedyIds(Tokens(10, 4, vocab()), 4000);
  request.set_request_id("dup");
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, request);
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));  // it is live now
  StreamResult second = client_->Generate(request);
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(second.status.error_message().find("request_id"), std::string::npos);
  context.TryCancel();
  StreamResult rest = testing::ReadStream(*reader);
  EXPECT_EQ(rest.status.error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace tandem::server
