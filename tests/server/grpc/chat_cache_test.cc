// A chat's prompts hit the prefix cache where users expect, over real Chat calls with the
// default cache policy: a second turn is served its whole first prompt from the cache even when
// the answer it repeats is not token for token what was sampled (a client that tidied it, or
// text that re-tokenizes differently: either way the prompt departs from the cached sequence
// where the answer starts), a new session is served the shared system prompt on its first
// request, and a regenerated last message is served everything before it. The cached answers
// equal those of a server without a cache.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using testing::Client;
using testing::StreamResult;
constexpr const char* kSystem = testing::kLibrarySystemPrompt;

v1::ChatRequest Conversation(const std::vector<std::pair<std::string, std::string>>& turns) {
  return testing::GreedyConversation(turns, 12);
}

class ChatCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadServedFixture();  // zamba2-tiny: ChatML template, hybrid Mamba-2
    ASSERT_NE(model_, nullptr);
  }
  std::unique_ptr<GrpcServer> Start(engine::CachePolicy policy) {
    ServerConfig config = testing::SmallServerConfig();
    config.engine.memory_bytes = 64 << 20;
    config.limits.max_request_bytes = 16 << 10;
    config.engine.scheduler.cache.policy = policy;
    absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(*model_, config);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }
  StreamResult Ask(Client& client, const v1::ChatRequest& request) {
    StreamResult result = client.Chat(request);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_TRUE(result.has_complete);
    return result;
  }
  std::unique_ptr<ServedModel> model_;
};

TEST_F(ChatCacheTest, LaterTurnsAndNewSessionsAreServedFromTheCache) {
  std::unique_ptr<GrpcServer> server = Start(engine::CachePolicy::kMarconi);
  ASSERT_NE(server, nullptr);
  Client client(server->port());

  const v1::ChatRequest first = Conversation({{"system", kSystem}, {"user", "Where is Emma?"}});
  StreamResult turn1 = Ask(client, first);
  const int64_t first_prompt = turn1.complete.usage().prompt_tokens();

  // The second turn repeats the first prompt, then the answer as the client kept it.
  const std::string kept_answer = "Emma is on the second shelf, with the other novels.";
  ASSERT_NE(turn1.text, kept_answer);
  const v1::ChatRequest second = Conversation({{"system", kSystem},
                                               {"user", "Where is Emma?"},
                                               {"assistant", kept_answer},
                                               {"user", "And Persuasion?"}});
  StreamResult turn2 = Ask(client, second);
  EXPECT_GE(turn2.complete.usage().cached_tokens(), first_prompt)
      << "the second turn must restore at least the whole first prompt";

  // A new session with the same system prompt restores it on its very first request.
  StreamResult other = Ask(client, Conversation({{"system", kSystem}, {"user", "Hello."}}));
  const int64_t system_tokens = 30;  // kSystem alone is more than this many tokens
  EXPECT_GE(other.complete.usage().cached_tokens(), system_tokens);

  // Regenerating the last message with other words restores everything before it.
  const v1::ChatRequest edited = Conversation({{"system", kSystem},
                                               {"user", "Where is Emma?"},
                                               {"assistant", kept_answer},
                                               {"user", "And Mansfield Park, then?"}});
  StreamResult regenerated = Ask(client, edited);
  EXPECT_GT(regenerated.complete.usage().cached_tokens(), first_prompt);

  // Exactness: each answer equals a cold server's.
  std::unique_ptr<GrpcServer> cold = Start(engine::CachePolicy::kNone);
  ASSERT_NE(cold, nullptr);
  Client cold_client(cold->port());
  for (const auto& [request, cached] : std::vector<std::pair<v1::ChatRequest, StreamResult>>{
           {second, turn2}, {edited, regenerated}}) {
    StreamResult uncached = Ask(cold_client, request);
    EXPECT_EQ(uncached.complete.usage().cached_tokens(), 0);
    EXPECT_EQ(uncached.tokens, cached.tokens);
  }
}

}  // namespace
}  // namespace tandem::server
