// A real GrpcServer on a loopback port over a fixture model, and helpers that talk to it through
// the generated C++ client.
#ifndef TANDEM_TESTS_SERVER_GRPC_GRPC_TEST_UTIL_H_
#define TANDEM_TESTS_SERVER_GRPC_GRPC_TEST_UTIL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/served_model.h"
#include "tandem/v1/tandem.grpc.pb.h"
#include "tests/test_tokens.h"

namespace tandem::server::testing {

inline std::string Fixture(const std::string& path) {
  return std::string(TANDEM_TEST_DATA) + "/" + path;
}

inline models::LoadOptions FixtureLoadOptions() {
  models::LoadOptions options;
  options.page_tokens = 16;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  return options;
}

// zamba2-tiny has a tokenizer and a ChatML chat template.
inline std::unique_ptr<ServedModel> LoadServedFixture(const std::string& name = "zamba2-tiny") {
  absl::StatusOr<ServedModel> served =
      ServedModel::Load(Fixture("models/" + name), FixtureLoadOptions());
  EXPECT_TRUE(served.ok()) << served.status();
  if (!served.ok()) return nullptr;
  return std::make_unique<ServedModel>(*std::move(served));
}

inline ServerConfig SmallServerConfig() {
  ServerConfig config;
  config.port = 0;
  config.engine.memory_bytes = 32 << 20;
  config.engine.threads = 2;
  config.engine.scheduler.prefill_chunk = 64;
  config.engine.scheduler.step_tokens = 256;
  config.limits.max_prompt_tokens = 512;
  config.limits.max_request_bytes = 4096;
  config.metrics.port = 0;  // tests run in parallel: never the fixed default port
  return config;
}

struct StreamResult {
  std::string request_id;
  std::vector<int32_t> tokens;
  std::string text;  // chunks' text followed by Complete's
  int chunks = 0;
  bool has_complete = false;
  v1::Complete complete;
  bool has_error = false;
  v1::Error error;
  std::vector<v1::TokenLogprobs> logprobs;
  std::vector<v1::TokenLogprobs> prompt_logprobs;
  int prompt_logprobs_chunk = -1;        // the chunk (from 0) that carried them
  std::vector<v1::ToolCall> tool_calls;  // chunks' calls followed by Complete's
  std::string reasoning;                 // chunks' reasoning followed by Complete's
  grpc::Status status;
};

// Reads a Generate/Chat stream to its end. `on_chunk` (optional) runs after each chunk.
inline StreamResult ReadStream(grpc::ClientReader<v1::GenerateResponse>& reader,
                               const std::function<void(const StreamResult&)>& on_chunk = {}) {
  StreamResult out;
  v1::GenerateResponse response;
  while (reader.Read(&response)) {
    out.request_id = response.request_id();
    if (response.has_chunk()) {
      if (response.chunk().prompt_logprobs_size() > 0) {
        EXPECT_EQ(out.prompt_logprobs_chunk, -1) << "prompt logprobs came twice";
        out.prompt_logprobs_chunk = out.chunks;
        out.prompt_logprobs.assign(response.chunk().prompt_logprobs().begin(),
                                   response.chunk().prompt_logprobs().end());
      }
      ++out.chunks;
      out.tokens.insert(out.tokens.end(), response.chunk().token_ids().begin(),
                        response.chunk().token_ids().end());
      out.text += response.chunk().text();
      out.reasoning += response.chunk().reasoning();
      for (const auto& lp : response.chunk().logprobs()) out.logprobs.push_back(lp);
      for (const auto& call : response.chunk().tool_calls()) out.tool_calls.push_back(call);
      if (on_chunk) on_chunk(out);
    } else if (response.has_complete()) {
      out.has_complete = true;
      out.complete = response.complete();
      out.text += response.complete().text();
      out.reasoning += response.complete().reasoning();
      for (const auto& call : response.complete().tool_calls()) out.tool_calls.push_back(call);
    } else if (response.has_error()) {
      out.has_error = true;
      out.error = response.error();
    }
  }
  out.status = reader.Finish();
  return out;
}

// A call's messages, sorted by choice (SamplingParams.n). `on_message` (optional) runs after
// each message.
struct ChoicesResult {
  std::vector<StreamResult> choices;
  int messages_without_index = 0;
  int completes_out_of_order = 0;  // a message for a choice after its Complete
  grpc::Status status;
};

inline ChoicesResult ReadChoices(
    grpc::ClientReader<v1::GenerateResponse>& reader, size_t n,
    const std::function<void(const v1::GenerateResponse&)>& on_message = {}) {
  ChoicesResult out;
  out.choices.resize(n);
  v1::GenerateResponse response;
  while (reader.Read(&response)) {
    if (!response.has_index()) ++out.messages_without_index;
    const size_t index = static_cast<size_t>(response.index());
    EXPECT_LT(index, n);
    if (index >= n) continue;
    StreamResult& choice = out.choices[index];
    if (choice.has_complete) ++out.completes_out_of_order;
    choice.request_id = response.request_id();
    if (response.has_chunk()) {
      ++choice.chunks;
      const v1::Chunk& chunk = response.chunk();
      choice.tokens.insert(choice.tokens.end(), chunk.token_ids().begin(), chunk.token_ids().end());
      choice.text += chunk.text();
      for (const auto& lp : chunk.logprobs()) choice.logprobs.push_back(lp);
      if (chunk.prompt_logprobs_size() > 0) {
        choice.prompt_logprobs.assign(chunk.prompt_logprobs().begin(),
                                      chunk.prompt_logprobs().end());
      }
      for (const auto& call : chunk.tool_calls()) choice.tool_calls.push_back(call);
    } else if (response.has_complete()) {
      choice.has_complete = true;
      choice.complete = response.complete();
      choice.text += response.complete().text();
      for (const auto& call : response.complete().tool_calls()) choice.tool_calls.push_back(call);
    } else if (response.has_error()) {
      choice.has_error = true;
      choice.error = response.error();
    }
    if (on_message) on_message(response);
  }
  out.status = reader.Finish();
  return out;
}

class Client {
 public:
  explicit Client(int port)
      : channel_(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials())),
        stub_(v1::Tandem::NewStub(channel_)) {}

  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  v1::Tandem::Stub& stub() { return *stub_; }

  StreamResult Generate(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    auto reader = stub_->Generate(&context, request);
    return ReadStream(*reader);
  }
  StreamResult Chat(const v1::ChatRequest& request) {
    grpc::ClientContext context;
    auto reader = stub_->Chat(&context, request);
    return ReadStream(*reader);
  }
  v1::ServerInfo ServerInfo() {
    grpc::ClientContext context;
    v1::ServerInfo info;
    grpc::Status status = stub_->GetServerInfo(&context, {}, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tandem::Stub> stub_;
};

inline v1::GenerateRequest GreedyIds(const std::vector<int32_t>& ids, int32_t max_new_tokens) {
  v1::GenerateRequest request;
  request.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(max_new_tokens);
  request.mutable_sampling()->set_ignore_eos(true);  // random fixture weights: fixed lengths
  return request;
}

using ::tandem::testing::Tokens;  // tests/test_tokens.h

// Polls `done` until it holds; asserts on the outcome, not on how long it took (the cap only
// keeps a broken server from hanging the suite).
inline bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 6000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// A library assistant's system prompt, long enough to span several KV pages.
inline constexpr char kLibrarySystemPrompt[] =
    "You are a careful assistant for a lending library. Answer in one short paragraph, name the "
    "shelf where each book is kept, and never invent titles that are not in the catalogue.";

// A greedy Chat of (role, content) messages generating exactly `max_new_tokens` tokens.
inline v1::ChatRequest GreedyConversation(
    const std::vector<std::pair<std::string, std::string>>& turns, int32_t max_new_tokens) {
  v1::ChatRequest request;
  for (const auto& [role, content] : turns) {
    v1::ChatMessage* message = request.add_messages();
    message->set_role(role);
    message->set_content(content);
  }
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(max_new_tokens);
  request.mutable_sampling()->set_ignore_eos(true);
  return request;
}

}  // namespace tandem::server::testing

#endif  // TANDEM_TESTS_SERVER_GRPC_GRPC_TEST_UTIL_H_
