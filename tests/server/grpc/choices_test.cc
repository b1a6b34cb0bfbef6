// Several choices of one prompt over gRPC (SamplingParams.n): each message names its choice,
// each choice is what a lone call with its seed says and ends with its own Complete, every choice
// takes a stream slot, and Abort or a client's cancel treat the call's choices as one call.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using testing::ChoicesResult;
using testing::Client;
using testing::Eventually;
using testing::GreedyIds;
using testing::LoadServedFixture;
using testing::ReadChoices;
using testing::SmallServerConfig;
using testing::StreamResult;
using testing::Tokens;

bool SameLogprobs(const std::vector<v1::TokenLogprobs>& a,
                  const std::vector<v1::TokenLogprobs>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].SerializeAsString() != b[i].SerializeAsString()) return false;
  }
  return true;
}

class ChoicesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LoadServedFixture().release();
    ASSERT_NE(model_, nullptr);
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  // Hydragen on every page the choices share (the default threshold would leave a 30-token
  // prompt's one shared page to plain attention), so that the bit-for-bit comparisons below cover
  // exact Hydragen.
  static ServerConfig SharingEveryPage() {
    ServerConfig config = SmallServerConfig();
    config.engine.hydragen.min_shared_work = 0;
    return config;
  }
  void Start(ServerConfig config = SharingEveryPage()) {
    auto server = GrpcServer::Start(*model_, config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<Client>(server_->port());
  }
  void SetUp() override { Start(); }

  ChoicesResult Generate(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    auto reader = client_->stub().Generate(&context, request);
    return ReadChoices(*reader, static_cast<size_t>(request.sampling().n()));
  }
  int32_t vocab() const { return model_->model->config().vocab_size; }

  // Sampled with logprobs: choices differ, and their scores are compared too.
  v1::GenerateRequest Sampled(int32_t n, int32_t max_new_tokens = 10) {
    v1::GenerateRequest request = GreedyIds(Tokens(30, 5, vocab()), max_new_tokens);
    request.mutable_sampling()->set_temperature(1.3f);
    request.mutable_sampling()->set_seed(77);
    request.mutable_sampling()->set_top_logprobs(2);
    request.mutable_sampling()->set_n(n);
    return request;
  }

  static ServedModel* model_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<Client> client_;
};

ServedModel* ChoicesTest::model_ = nullptr;

TEST_F(ChoicesTest, EachChoiceIsALoneCallWithItsSeed) {
  v1::GenerateRequest request = Sampled(3);
  request.set_request_id("three");
  const ChoicesResult got = Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.messages_without_index, 0);
  EXPECT_EQ(got.completes_out_of_order, 0);
  std::vector<std::vector<int32_t>> outputs;
  for (int32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const StreamResult& choice = got.choices[i];
    EXPECT_EQ(choice.request_id, "three");
    ASSERT_TRUE(choice.has_complete);
    EXPECT_EQ(choice.complete.finish_reason(), v1::LENGTH);
    EXPECT_EQ(choice.tokens.size(), 10u);
    EXPECT_EQ(choice.complete.usage().prompt_tokens(), 30);
    EXPECT_EQ(choice.complete.usage().completion_tokens(), 10);
    // The same as a lone call seeded as this choice is (choice 0: the request's own seed).
    v1::GenerateRequest lone = Sampled(1);
    lone.mutable_sampling()->set_seed(engine::ChoiceSeed(77, i));
    const StreamResult alone = client_->Generate(lone);
    ASSERT_TRUE(alone.status.ok()) << alone.status.error_message();
    EXPECT_EQ(choice.tokens, alone.tokens);
    EXPECT_EQ(choice.text, alone.text);
    EXPECT_TRUE(SameLogprobs(choice.logprobs, alone.logprobs));
    outputs.push_back(choice.tokens);
  }
  EXPECT_GT(server_->engine().stats().hydragen_nodes, 0);  // the choices shared their pages
  // Sampled with different seeds, they differ.
  EXPECT_TRUE(outputs[0] != outputs[1] || outputs[1] != outputs[2]);
  // The first choice prefilled the prompt; the others restored all of it but its last token
  // (whose logits each choice computes).
  EXPECT_EQ(got.choices[0].complete.usage().cached_tokens(), 0);
  EXPECT_EQ(got.choices[1].complete.usage().cached_tokens(), 29);
  EXPECT_EQ(got.choices[2].complete.usage().cached_tokens(), 29);
}

TEST_F(ChoicesTest, OneChoiceSendsNoIndex) {
  v1::GenerateRequest request = Sampled(1);
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, request);
  const ChoicesResult got = ReadChoices(*reader, 1);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_GE(got.messages_without_index, 2);  // every message: a chunk or more, the Complete
  EXPECT_EQ(got.choices[0].tokens.size(), 10u);
  request.mutable_sampling()->clear_n();  // the default is 1
  EXPECT_EQ(client_->Generate(request).tokens, got.choices[0].tokens);
}

TEST_F(ChoicesTest, EveryChoiceScoresThePrompt) {
  v1::GenerateRequest request = Sampled(2, 3);
  request.mutable_sampling()->set_prompt_logprobs(1);
  const ChoicesResult got = Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  v1::GenerateRequest lone = Sampled(1, 3);
  lone.mutable_sampling()->set_prompt_logprobs(1);
  const StreamResult alone = client_->Generate(lone);
  ASSERT_EQ(alone.prompt_logprobs.size(), 29u);
  for (const StreamResult& choice : got.choices) {
    EXPECT_TRUE(SameLogprobs(choice.prompt_logprobs, alone.prompt_logprobs));
  }
  // Scoring only: every choice's scores, then its Complete.
  request.mutable_sampling()->set_max_new_tokens(0);
  const ChoicesResult scored = Generate(request);
  ASSERT_TRUE(scored.status.ok()) << scored.status.error_message();
  for (const StreamResult& choice : scored.choices) {
    EXPECT_TRUE(choice.tokens.empty());
    EXPECT_TRUE(SameLogprobs(choice.prompt_logprobs, alone.prompt_logprobs));
    EXPECT_TRUE(choice.has_complete);
  }
}

TEST_F(ChoicesTest, ChatChoicesAreLoneChatsWithTheirSeeds) {
  v1::ChatRequest chat;
  v1::ChatMessage* message = chat.add_messages();
  message->set_role("user");
  message->set_content("Tell me a story.");
  chat.mutable_sampling()->set_temperature(1.0f);
  chat.mutable_sampling()->set_seed(5);
  chat.mutable_sampling()->set_max_new_tokens(8);
  chat.mutable_sampling()->set_ignore_eos(true);
  chat.mutable_sampling()->set_n(2);
  grpc::ClientContext context;
  auto reader = client_->stub().Chat(&context, chat);
  const ChoicesResult got = ReadChoices(*reader, 2);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  for (int32_t i = 0; i < 2; ++i) {
    v1::ChatRequest lone = chat;
    lone.mutable_sampling()->set_n(1);
    lone.mutable_sampling()->set_seed(engine::ChoiceSeed(5, i));
    const StreamResult alone = client_->Chat(lone);
    ASSERT_TRUE(alone.status.ok()) << alone.status.error_message();
    EXPECT_EQ(got.choices[i].tokens, alone.tokens) << i;
    EXPECT_EQ(got.choices[i].text, alone.text) << i;
  }
}

TEST_F(ChoicesTest, BadCountsAreRefusedByName) {
  for (int32_t n : {0, -1, 65}) {
    SCOPED_TRACE(n);
    v1::GenerateRequest request = Sampled(n);
    grpc::ClientContext context;
    auto reader = client_->stub().Generate(&context, request);
    const ChoicesResult got = ReadChoices(*reader, 1);
    EXPECT_EQ(got.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(got.status.error_message(),
              "sampling.n: must be in [1, 64], got " + std::to_string(n));
  }
}

// Each choice takes one of the server's stream slots: more than it has can never run (the
// client's error); more than are free now is RESOURCE_EXHAUSTED; all come back afterwards.
TEST_F(ChoicesTest, ChoicesTakeAStreamSlotEach) {
  ServerConfig config = SmallServerConfig();
  config.limits.max_concurrent_streams = 3;
  Start(config);
  const ChoicesResult never = Generate(Sampled(4));
  EXPECT_EQ(never.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(never.status.error_message(),
            "sampling.n: each choice takes one of the server's 3 concurrent streams, so it can "
            "never run 4");

  // Two slots held by a long call of two choices.
  v1::GenerateRequest held = Sampled(2, 4000);
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, held);
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  const ChoicesResult busy = Generate(Sampled(2));
  EXPECT_EQ(busy.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(busy.status.error_message().find("each of the 2 choices takes one"), std::string::npos)
      << busy.status.error_message();
  const ChoicesResult one = Generate(Sampled(1));
  EXPECT_TRUE(one.status.ok()) << one.status.error_message();
  // The client hangs up: every choice stops and frees its slot and its memory.
  context.TryCancel();
  const ChoicesResult cancelled = ReadChoices(*reader, 2);
  EXPECT_EQ(cancelled.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([&] {
    const v1::ServerInfo info = client_->ServerInfo();
    return info.active_streams() == 0 && info.running_requests() == 0 &&
           info.waiting_requests() == 0;
  }));
  for (int i = 0; i < 3; ++i) {
    const ChoicesResult again = Generate(Sampled(3, 2));
    ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  }
}

// Abort of the call's id stops every choice, each ending with ABORTED.
TEST_F(ChoicesTest, AbortStopsEveryChoice) {
  v1::GenerateRequest request = Sampled(3, 4000);
  request.set_request_id("abort-choices");
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, request);
  bool aborted = false;
  const ChoicesResult got = ReadChoices(*reader, 3, [&](const v1::GenerateResponse&) {
    if (aborted) return;
    aborted = true;
    grpc::ClientContext abort_context;
    v1::AbortRequest abort;
    abort.set_request_id("abort-choices");
    v1::AbortResponse answer;
    ASSERT_TRUE(client_->stub().Abort(&abort_context, abort, &answer).ok());
    EXPECT_TRUE(answer.aborted());
  });
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  for (const StreamResult& choice : got.choices) {
    ASSERT_TRUE(choice.has_complete);
    EXPECT_EQ(choice.complete.finish_reason(), v1::ABORTED);
    EXPECT_LT(choice.tokens.size(), 4000u);
  }
  // The call is over: its id is free, and nothing runs.
  grpc::ClientContext abort_context;
  v1::AbortRequest abort;
  abort.set_request_id("abort-choices");
  v1::AbortResponse answer;
  ASSERT_TRUE(client_->stub().Abort(&abort_context, abort, &answer).ok());
  EXPECT_FALSE(answer.aborted());
  EXPECT_TRUE(Eventually([&] { return client_->ServerInfo().running_requests() == 0; }));
}

// Abort after the first choice has finished still stops the others: every choice stands under
// the call's id. A stop token that choice 0 writes early and the others only much later (found
// in a first run: seeded sampling repeats) ends choice 0 alone.
TEST_F(ChoicesTest, AbortAfterAChoiceFinishedStopsTheOthers) {
  int32_t stop = -1;
  uint64_t seed = 0;
  for (uint64_t s = 1; s <= 40 && stop < 0; ++s) {
    v1::GenerateRequest probe = Sampled(3, 300);
    probe.mutable_sampling()->set_seed(s);
    const ChoicesResult run = Generate(probe);
    ASSERT_TRUE(run.status.ok()) << run.status.error_message();
    const auto first_at = [&](int choice, int32_t token) {
      const std::vector<int32_t>& t = run.choices[choice].tokens;
      return std::find(t.begin(), t.end(), token) - t.begin();
    };
    for (size_t k = 0; k < 3 && stop < 0; ++k) {
      const int32_t token = run.choices[0].tokens[k];
      if (first_at(0, token) == static_cast<ptrdiff_t>(k) && first_at(1, token) >= 200 &&
          first_at(2, token) >= 200) {
        stop = token;
        seed = s;
      }
    }
  }
  ASSERT_GE(stop, 0) << "no seed gave choice 0 an early token the others lack";

  v1::GenerateRequest request = Sampled(3, 300);
  request.mutable_sampling()->set_seed(seed);
  request.mutable_sampling()->add_stop_token_ids(stop);
  request.set_request_id("first-done");
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, request);
  bool aborted = false;
  const ChoicesResult got = ReadChoices(*reader, 3, [&](const v1::GenerateResponse& message) {
    if (aborted || !message.has_complete() || message.index() != 0) return;
    EXPECT_EQ(message.complete().finish_reason(), v1::STOP);
    aborted = true;
    grpc::ClientContext abort_context;
    v1::AbortRequest abort;
    abort.set_request_id("first-done");
    v1::AbortResponse answer;
    ASSERT_TRUE(client_->stub().Abort(&abort_context, abort, &answer).ok());
    EXPECT_TRUE(answer.aborted());  // the others were still running
  });
  ASSERT_TRUE(aborted);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  for (int i : {1, 2}) {
    ASSERT_TRUE(got.choices[i].has_complete) << i;
    EXPECT_EQ(got.choices[i].complete.finish_reason(), v1::ABORTED) << i;
    EXPECT_LT(got.choices[i].tokens.size(), 200u) << i;
  }
}

// The call's id is reserved once, for all its choices, and nobody else's.
TEST_F(ChoicesTest, TheCallsIdIsReservedOnce) {
  v1::GenerateRequest request = Sampled(3, 4000);
  request.set_request_id("mine");
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, request);
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  EXPECT_EQ(first.request_id(), "mine");
  const ChoicesResult again = Generate(request);
  EXPECT_EQ(again.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  // An id the server would hand out next is still the client's to take.
  v1::GenerateRequest other = Sampled(1, 2);
  other.set_request_id("req-2");
  EXPECT_TRUE(client_->Generate(other).status.ok());
  context.TryCancel();
  EXPECT_EQ(ReadChoices(*reader, 3).status.error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace tandem::server
