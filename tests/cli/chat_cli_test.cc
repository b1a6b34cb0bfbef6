// `tandem chat` against a real `tandem serve` on loopback: user lines piped into stdin become a
// multi-turn conversation whose answers stream to stdout, the second turn restores the first
// from the prefix cache, a reasoning model's reasoning goes to stderr, and errors are reported
// with their gRPC code.
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/cli/chat_turn.h"
#include "server/client/connection.h"
#include "tests/cli/run_tandem.h"
#include "tests/cli/serve_process.h"
#include "tests/server/thinking_model.h"

namespace tandem {
namespace {

using testing::RunTandem;
using testing::ServeProcess;
using testing::TestData;

// Writes `text` to a file that lives as long as the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("tandem_chat_input_" + std::to_string(::getpid()) + "_" +
               std::to_string(counter_++))) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

struct TurnStats {
  int64_t tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
};

// The per-turn stat lines on stderr: "[ttft 12 ms · 8 tokens · ... · prompt 40 tokens, 0 cached
// · length]".
std::vector<TurnStats> StatLines(const std::string& err) {
  static const std::regex line(
      R"(\[ttft \d+ ms · (\d+) tokens?(?: · [0-9.]+ tok/s)? · prompt (\d+) tokens, (\d+) cached)");
  std::vector<TurnStats> stats;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator();
       ++it) {
    stats.push_back({std::stoll((*it)[1]), std::stoll((*it)[2]), std::stoll((*it)[3])});
  }
  return stats;
}

class ChatCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // zamba2-tiny has a tokenizer and a ChatML template.
    server_ = new ServeProcess(
        {"--model", TestData("models/zamba2-tiny"), "--threads", "2", "--memory-gib", "0.05"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()) << "tandem serve did not start"; }

  static std::string Chat(const std::string& flags, const std::string& input_path) {
    return "chat --address " + server_->address() + " " + flags + " < " + input_path;
  }

  static ServeProcess* server_;
};

ServeProcess* ChatCliTest::server_ = nullptr;

// What the server answers to `messages` (greedy, 12 tokens past EOS), straight through the API.
std::string ExpectedAnswer(const client::Connection& connection,
                           const std::vector<std::pair<std::string, std::string>>& messages) {
  v1::ChatRequest request;
  for (const auto& [role, content] : messages) {
    v1::ChatMessage* m = request.add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(12);
  request.mutable_sampling()->set_ignore_eos(true);
  cli::ChatTurnResult turn =
      cli::RunChatTurn(connection, request, std::chrono::seconds(60), [](std::string_view) {});
  EXPECT_TRUE(turn.status.ok()) << turn.status.error_message();
  return turn.text;
}

TEST_F(ChatCliTest, PipedTurnsStreamAnswersAndLaterTurnsHitTheCache) {
  TempFile input("Name a colour.\nAnd another one?\nOne more.\n");
  const auto o = RunTandem(Chat(
      "--system 'You are terse.' --temperature 0 --max-new-tokens 12 --ignore-eos", input.path()));
  ASSERT_EQ(o.exit_code, 0) << o.err;

  const std::vector<TurnStats> stats = StatLines(o.err);
  ASSERT_EQ(stats.size(), 3u) << o.err;
  for (const TurnStats& turn : stats) EXPECT_EQ(turn.tokens, 12);
  // Each prompt holds the whole conversation before it.
  EXPECT_GT(stats[1].prompt_tokens, stats[0].prompt_tokens + 12);
  EXPECT_GT(stats[2].prompt_tokens, stats[1].prompt_tokens + 12);
  EXPECT_GT(stats[1].cached_tokens, 0) << o.err;
  // The random-weight fixture's answers do not re-tokenize to the ids it generated (byte
  // fragments), so turn 2 restores only up to a checkpoint before the first answer. Prefilling
  // turn 2 saved one where its prompt leaves turn 1's tokens (Marconi's speculative insertion),
  // past turn 1's whole prompt: turn 3 restores at least that much.
  EXPECT_GE(stats[2].cached_tokens, stats[0].prompt_tokens) << o.err;

  // The answers on stdout are the server's answers to the conversation as it grew: each request
  // carried the earlier answers back as the assistant's messages.
  auto connection = client::Connection::Open(server_->address(), {});
  ASSERT_TRUE(connection.ok());
  std::vector<std::pair<std::string, std::string>> conversation = {{"system", "You are terse."}};
  std::string expected;
  for (const char* user : {"Name a colour.", "And another one?", "One more."}) {
    conversation.emplace_back("user", user);
    const std::string answer = ExpectedAnswer(**connection, conversation);
    conversation.emplace_back("assistant", answer);
    expected += answer.empty() || answer.back() != '\n' ? answer + "\n" : answer;
  }
  EXPECT_EQ(o.out, expected);
}

TEST_F(ChatCliTest, ResetForgetsTheConversationAndQuitEndsIt) {
  TempFile input("Hello.\n/reset\nHello.\n/quit\nnever sent\n");
  const auto o = RunTandem(Chat("--temperature 0 --max-new-tokens 4 --ignore-eos", input.path()));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::vector<TurnStats> stats = StatLines(o.err);
  ASSERT_EQ(stats.size(), 2u) << o.err;
  // After /reset the same first message makes the same prompt.
  EXPECT_EQ(stats[1].prompt_tokens, stats[0].prompt_tokens);
  EXPECT_NE(o.err.find("conversation cleared"), std::string::npos);
}

TEST_F(ChatCliTest, ATurnRefusedByTheServerIsReportedAndTheNextOneRuns) {
  // Invalid UTF-8 in a message: the server refuses that turn with INVALID_ARGUMENT.
  TempFile input("bad \xff\xfe byte\nfine now\n");
  const auto o = RunTandem(Chat("--temperature 0 --max-new-tokens 4 --ignore-eos", input.path()));
  EXPECT_EQ(o.exit_code, 1) << "a failed turn makes a piped session exit 1";
  EXPECT_NE(o.err.find("error: INVALID_ARGUMENT"), std::string::npos) << o.err;
  const std::vector<TurnStats> stats = StatLines(o.err);
  ASSERT_EQ(stats.size(), 1u) << o.err;
  EXPECT_EQ(stats[0].tokens, 4);
}

TEST(ChatCliErrorsTest, AServerThatIsNotThereIsUnavailable) {
  // Port 1 on loopback: nothing listens there.
  TempFile input("hello\n");
  const auto o = RunTandem("chat --address 127.0.0.1:1 < " + input.path());
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("UNAVAILABLE"), std::string::npos) << o.err;
}

TEST(ChatCliErrorsTest, BadFlagsExitTwoNamingTheFlag) {
  auto o = RunTandem("chat --top-p 1.5 < /dev/null");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--top-p"), std::string::npos) << o.err;
  o = RunTandem("chat --tls-server-name x < /dev/null");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--tls-ca"), std::string::npos) << o.err;
  o = RunTandem("chat --tls-ca /nonexistent/ca.pem < /dev/null");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("/nonexistent/ca.pem"), std::string::npos) << o.err;
  o = RunTandem("chat --help");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* flag : {"--address", "--system", "--temperature", "--top-p", "--top-k",
                           "--max-new-tokens", "--seed", "--tls-ca", "--token"}) {
    EXPECT_NE(o.out.find(flag), std::string::npos) << flag;
  }
}

// A reasoning model's reasoning streams to stderr and only its answer to stdout: over 12 tokens
// that never close the block the template opens, stdout gets nothing, stderr the reasoning the
// API returns for the same conversation.
TEST(ChatCliReasoningTest, TheReasoningGoesToStderr) {
  const testing::ThinkingModel model(::testing::TempDir());
  ServeProcess server({"--model", model.dir(), "--threads", "2", "--memory-gib", "0.05"});
  ASSERT_TRUE(server.ok()) << "tandem serve did not start";
  TempFile input("Why is the sky blue?\n");
  const auto o = RunTandem("chat --address " + server.address() +
                           " --temperature 0 --max-new-tokens 12 --ignore-eos < " + input.path());
  ASSERT_EQ(o.exit_code, 0) << o.err;

  auto connection = client::Connection::Open(server.address(), {});
  ASSERT_TRUE(connection.ok()) << connection.status();
  v1::ChatRequest request;
  v1::ChatMessage* user = request.add_messages();
  user->set_role("user");
  user->set_content("Why is the sky blue?");
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(12);
  request.mutable_sampling()->set_ignore_eos(true);
  const cli::ChatTurnResult turn = cli::RunChatTurn(
      **connection, request, std::chrono::seconds(60), [](std::string_view) {},
      [](std::string_view) {});
  ASSERT_TRUE(turn.status.ok()) << turn.status.error_message();
  ASSERT_FALSE(turn.reasoning.empty());
  EXPECT_EQ(turn.text, "");
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find(turn.reasoning), std::string::npos) << o.err;
}

}  // namespace
}  // namespace tandem
