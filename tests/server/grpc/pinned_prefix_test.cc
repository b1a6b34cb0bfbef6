// PinPrefix, UnpinPrefix and ListPinnedPrefixes over real gRPC: a pinned system prompt (or
// text, or token ids) is restored by the first Chat or Generate that starts with it, with the
// answer a server without a cache gives; pins are per caller; every refusal names its cause:
// a bad name or prefix, a name in use, the caller's cap, the byte cap, no cache, pinning off.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/util/bearer_tokens.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using testing::Client;
using testing::StreamResult;
constexpr const char* kSystem = testing::kLibrarySystemPrompt;

v1::ChatRequest Conversation(const std::vector<std::pair<std::string, std::string>>& turns) {
  return testing::GreedyConversation(turns, 8);
}

struct PinOutcome {
  grpc::Status status;
  v1::PinnedPrefix pinned;
};

class PinnedPrefixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadServedFixture();  // zamba2-tiny: ChatML template, hybrid Mamba-2
    ASSERT_NE(model_, nullptr);
  }
  static ServerConfig Config(engine::CachePolicy policy = engine::CachePolicy::kMarconi,
                             size_t max_pinned_bytes = 16 << 20) {
    ServerConfig config = testing::SmallServerConfig();
    config.engine.memory_bytes = 64 << 20;
    config.limits.max_request_bytes = 16 << 10;
    config.engine.scheduler.cache.policy = policy;
    config.engine.scheduler.max_pinned_bytes = max_pinned_bytes;
    return config;
  }
  std::unique_ptr<GrpcServer> Start(const ServerConfig& config) {
    absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(*model_, config);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }
  static PinOutcome Pin(Client& client, const v1::PinPrefixRequest& request,
                        const std::string& token = "") {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    PinOutcome out;
    out.status = client.stub().PinPrefix(&context, request, &out.pinned);
    return out;
  }
  static grpc::Status Unpin(Client& client, const std::string& name,
                            const std::string& token = "") {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::UnpinPrefixRequest request;
    request.set_name(name);
    v1::UnpinPrefixResponse response;
    return client.stub().UnpinPrefix(&context, request, &response);
  }
  static std::vector<std::string> List(Client& client, const std::string& token = "") {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::ListPinnedPrefixesResponse response;
    EXPECT_TRUE(client.stub().ListPinnedPrefixes(&context, {}, &response).ok());
    std::vector<std::string> names;
    for (const v1::PinnedPrefix& p : response.prefixes()) names.push_back(p.name());
    return names;
  }
  static v1::PinPrefixRequest ChatPin(const std::string& name) {
    v1::PinPrefixRequest request;
    request.set_name(name);
    v1::ChatMessage* system = request.mutable_chat()->add_messages();
    system->set_role("system");
    system->set_content(kSystem);
    return request;
  }
  static v1::PinPrefixRequest IdsPin(const std::string& name, const std::vector<int32_t>& ids) {
    v1::PinPrefixRequest request;
    request.set_name(name);
    request.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
    return request;
  }
  std::unique_ptr<ServedModel> model_;
};

TEST_F(PinnedPrefixTest, APinnedSystemPromptIsRestoredByTheFirstChatThatStartsWithIt) {
  std::unique_ptr<GrpcServer> server = Start(Config());
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  const PinOutcome pinned = Pin(client, ChatPin("library"));
  ASSERT_TRUE(pinned.status.ok()) << pinned.status.error_message();
  EXPECT_EQ(pinned.pinned.name(), "library");
  EXPECT_GT(pinned.pinned.tokens(), 30);
  EXPECT_EQ(List(client), std::vector<std::string>{"library"});
  // ServerInfo is as of the engine's latest step, which may end after PinPrefix answers.
  EXPECT_TRUE(testing::Eventually([&] { return client.ServerInfo().pinned_prefixes() == 1; }));
  EXPECT_GT(client.ServerInfo().pinned_bytes(), 0);

  const v1::ChatRequest ask = Conversation({{"system", kSystem}, {"user", "Where is Emma?"}});
  StreamResult answer = client.Chat(ask);
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_EQ(answer.complete.usage().cached_tokens(), pinned.pinned.tokens());

  // Token ids, and text tokenized as Generate tokenizes it.
  const std::vector<int32_t> ids = testing::Tokens(40, 7, model_->model->config().vocab_size);
  const PinOutcome by_ids = Pin(client, IdsPin("ids", ids));
  ASSERT_TRUE(by_ids.status.ok()) << by_ids.status.error_message();
  EXPECT_EQ(by_ids.pinned.tokens(), 40);
  std::vector<int32_t> longer = ids;
  longer.insert(longer.end(), {11, 12, 13});
  StreamResult generated = client.Generate(testing::GreedyIds(longer, 4));
  ASSERT_TRUE(generated.status.ok()) << generated.status.error_message();
  EXPECT_EQ(generated.complete.usage().cached_tokens(), 40);
  v1::PinPrefixRequest text;
  text.set_name("notes.v1");
  text.set_text("Opening hours: nine to five, closed on Sundays.");
  const PinOutcome by_text = Pin(client, text);
  ASSERT_TRUE(by_text.status.ok()) << by_text.status.error_message();
  grpc::ClientContext tokenize_context;
  v1::TokenizeRequest tokenize;
  tokenize.set_text(text.text());
  v1::TokenizeResponse tokenized;
  ASSERT_TRUE(client.stub().Tokenize(&tokenize_context, tokenize, &tokenized).ok());
  EXPECT_EQ(by_text.pinned.tokens(), tokenized.token_ids_size());
  EXPECT_EQ(List(client), (std::vector<std::string>{"library", "ids", "notes.v1"}));

  // The restored answer is the one a server without a cache gives.
  std::unique_ptr<GrpcServer> cold = Start(Config(engine::CachePolicy::kNone));
  ASSERT_NE(cold, nullptr);
  Client cold_client(cold->port());
  StreamResult uncached = cold_client.Chat(ask);
  ASSERT_TRUE(uncached.status.ok());
  EXPECT_EQ(uncached.tokens, answer.tokens);

  ASSERT_TRUE(Unpin(client, "library").ok());
  EXPECT_EQ(Unpin(client, "library").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(List(client), (std::vector<std::string>{"ids", "notes.v1"}));
  EXPECT_TRUE(testing::Eventually([&] { return client.ServerInfo().pinned_prefixes() == 2; }));
}

TEST_F(PinnedPrefixTest, BadPinsAreRefusedNamingWhatIsWrong) {
  ServerConfig config = Config();
  config.limits.max_pinned_prefixes = 2;
  std::unique_ptr<GrpcServer> server = Start(config);
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  const int32_t vocab = model_->model->config().vocab_size;
  auto expect = [&](const v1::PinPrefixRequest& request, grpc::StatusCode code,
                    const std::string& says) {
    const PinOutcome out = Pin(client, request);
    EXPECT_EQ(out.status.error_code(), code) << out.status.error_message();
    EXPECT_NE(out.status.error_message().find(says), std::string::npos)
        << out.status.error_message();
  };
  expect(IdsPin("", {5}), grpc::StatusCode::INVALID_ARGUMENT, "name: must be 1..64");
  expect(IdsPin("has space", {5}), grpc::StatusCode::INVALID_ARGUMENT, "name: character 3");
  v1::PinPrefixRequest nothing;
  nothing.set_name("nothing");
  expect(nothing, grpc::StatusCode::INVALID_ARGUMENT, "prefix: one of text, token_ids or chat");
  expect(IdsPin("empty", {}), grpc::StatusCode::INVALID_ARGUMENT, "token_ids.ids");
  expect(IdsPin("outside", {5, vocab}), grpc::StatusCode::INVALID_ARGUMENT, "token_ids.ids[1]");
  v1::PinPrefixRequest bad_role = ChatPin("bad-role");
  bad_role.mutable_chat()->mutable_messages(0)->set_role("narrator");
  expect(bad_role, grpc::StatusCode::INVALID_ARGUMENT, "chat.messages[0].role");

  ASSERT_TRUE(Pin(client, IdsPin("a", testing::Tokens(20, 1, vocab))).status.ok());
  expect(IdsPin("a", testing::Tokens(20, 2, vocab)), grpc::StatusCode::ALREADY_EXISTS,
         "\"a\" is already pinned");
  ASSERT_TRUE(Pin(client, IdsPin("b", testing::Tokens(20, 3, vocab))).status.ok());
  expect(IdsPin("c", testing::Tokens(20, 4, vocab)), grpc::StatusCode::RESOURCE_EXHAUSTED,
         "already holds 2 pinned prefixes");
  EXPECT_EQ(Unpin(client, "no such").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Unpin(client, "c").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(List(client), (std::vector<std::string>{"a", "b"}));
}

TEST_F(PinnedPrefixTest, PinsPastTheByteCapOrWithoutACacheAreRefused) {
  const int32_t vocab = model_->model->config().vocab_size;
  {
    std::unique_ptr<GrpcServer> server = Start(Config(engine::CachePolicy::kNone));
    ASSERT_NE(server, nullptr);
    Client client(server->port());
    const PinOutcome out = Pin(client, IdsPin("x", testing::Tokens(20, 1, vocab)));
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(out.status.error_message().find("needs a prefix cache"), std::string::npos);
  }
  {
    std::unique_ptr<GrpcServer> server = Start(Config(engine::CachePolicy::kMarconi, 0));
    ASSERT_NE(server, nullptr);
    Client client(server->port());
    const PinOutcome out = Pin(client, IdsPin("x", testing::Tokens(20, 1, vocab)));
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(out.status.error_message().find("pinning prefixes is off"), std::string::npos);
    EXPECT_TRUE(List(client).empty());
  }
  // Room for one 100-token prefix, not two.
  std::unique_ptr<GrpcServer> probe = Start(Config());
  ASSERT_NE(probe, nullptr);
  Client probe_client(probe->port());
  ASSERT_TRUE(Pin(probe_client, IdsPin("one", testing::Tokens(100, 1, vocab))).status.ok());
  // ServerInfo is as of the engine's latest step, which may end after PinPrefix answers.
  ASSERT_TRUE(testing::Eventually([&] { return probe_client.ServerInfo().pinned_bytes() > 0; }));
  const int64_t one = probe_client.ServerInfo().pinned_bytes();
  std::unique_ptr<GrpcServer> server =
      Start(Config(engine::CachePolicy::kMarconi, static_cast<size_t>(one + one / 2)));
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  ASSERT_TRUE(Pin(client, IdsPin("one", testing::Tokens(100, 1, vocab))).status.ok());
  const PinOutcome two = Pin(client, IdsPin("two", testing::Tokens(100, 2, vocab)));
  EXPECT_EQ(two.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(two.status.error_message().find("pinned prefixes would hold"), std::string::npos)
      << two.status.error_message();
  EXPECT_EQ(List(client), std::vector<std::string>{"one"});
  // The refused name is free again, and with "one" unpinned there is room for it.
  ASSERT_TRUE(Unpin(client, "one").ok());
  const PinOutcome again = Pin(client, IdsPin("two", testing::Tokens(100, 2, vocab)));
  EXPECT_TRUE(again.status.ok()) << again.status.error_message();
}

// `tandem serve --pin-system-prompt`: pinned before the server is up, the server's own.
TEST_F(PinnedPrefixTest, SystemPromptsPinnedAtStartAreInPlaceWhenTheServerIsUp) {
  ServerConfig config = Config();
  config.startup_pins.push_back({"library", kSystem});
  std::unique_ptr<GrpcServer> server = Start(config);
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  EXPECT_EQ(List(client), std::vector<std::string>{"library"});
  StreamResult answer =
      client.Chat(Conversation({{"system", kSystem}, {"user", "Where is Emma?"}}));
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_GT(answer.complete.usage().cached_tokens(), 30);  // kSystem alone is more than this

  // A start pin the server cannot make fails the start, naming it.
  ServerConfig off = Config(engine::CachePolicy::kNone);
  off.startup_pins.push_back({"library", kSystem});
  absl::StatusOr<std::unique_ptr<GrpcServer>> refused = GrpcServer::Start(*model_, off);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--pin-system-prompt library: "), std::string::npos)
      << refused.status();
}

TEST_F(PinnedPrefixTest, WithoutTokensPinsAreSharedByEveryClient) {
  // Listening on every address, so that clients can come from two (127.0.0.1 and ::1), as a
  // client restarted in another pod would.
  ServerConfig config = Config();
  config.host = "::";
  std::unique_ptr<GrpcServer> server = Start(config);
  ASSERT_NE(server, nullptr);
  Client first(server->port());
  ASSERT_TRUE(
      Pin(first, IdsPin("shared", testing::Tokens(30, 1, model_->model->config().vocab_size)))
          .status.ok());
  auto second = v1::Tandem::NewStub(grpc::CreateChannel(absl::StrCat("[::1]:", server->port()),
                                                        grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::ListPinnedPrefixesResponse listed;
    ASSERT_TRUE(second->ListPinnedPrefixes(&context, {}, &listed).ok());
    ASSERT_EQ(listed.prefixes_size(), 1);
    EXPECT_EQ(listed.prefixes(0).name(), "shared");
  }
  grpc::ClientContext context;
  v1::UnpinPrefixRequest unpin;
  unpin.set_name("shared");
  v1::UnpinPrefixResponse unpinned;
  EXPECT_TRUE(second->UnpinPrefix(&context, unpin, &unpinned).ok());
  EXPECT_TRUE(List(first).empty());
}

TEST_F(PinnedPrefixTest, WithTokensPinsBelongToTheirCaller) {
  ServerConfig config = Config();
  absl::StatusOr<BearerTokens> tokens =
      BearerTokens::Parse("alice:alice-secret\nbob:bob-secret\n", "tokens.txt");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  config.security.tokens = *std::move(tokens);
  std::unique_ptr<GrpcServer> server = Start(config);
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  const int32_t vocab = model_->model->config().vocab_size;
  ASSERT_TRUE(
      Pin(client, IdsPin("docs", testing::Tokens(30, 1, vocab)), "alice-secret").status.ok());
  EXPECT_TRUE(List(client, "bob-secret").empty());
  EXPECT_EQ(Unpin(client, "docs", "bob-secret").error_code(), grpc::StatusCode::NOT_FOUND);
  // The same name is bob's own.
  EXPECT_TRUE(Pin(client, IdsPin("docs", testing::Tokens(30, 2, vocab)), "bob-secret").status.ok());
  EXPECT_EQ(List(client, "alice-secret"), std::vector<std::string>{"docs"});
  EXPECT_EQ(Pin(client, IdsPin("x", {5}), "").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Unpin(client, "docs", "alice-secret").ok());
  EXPECT_EQ(List(client, "bob-secret"), std::vector<std::string>{"docs"});
}

}  // namespace
}  // namespace tandem::server
