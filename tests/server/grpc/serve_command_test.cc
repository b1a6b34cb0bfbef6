// The real `tandem serve` binary: it announces its port, answers a C++ client (and an HTTP one on
// --http-port), reports SERVING, and on SIGTERM drains the request in flight and exits 0.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/grpc/grpc_test_util.h"
#include "tests/server/http_test_client.h"

namespace tandem::server {
namespace {

using testing::Client;
using testing::GreedyIds;
using testing::StreamResult;

// A child process running `tandem` with `args`; its stdout is a pipe read line by line.
class TandemProcess {
 public:
  explicit TandemProcess(std::vector<std::string> args) {
    // Everything the child needs is built before fork(): between fork and exec a child of a
    // multi-threaded process may only make async-signal-safe calls.
    const std::string binary = std::string(TANDEM_BINARY_DIR) + "/tandem";
    std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~TandemProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) fclose(out_);
  }

  // The next line of stdout, without the newline; "" at end of file.
  std::string ReadLine() {
    char buffer[512];
    if (out_ == nullptr || fgets(buffer, sizeof(buffer), out_) == nullptr) return "";
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
  // Everything left on stdout, up to end of file.
  std::string ReadAll() {
    std::string text;
    char buffer[512];
    size_t n = 0;
    while (out_ != nullptr && (n = fread(buffer, 1, sizeof(buffer), out_)) > 0)
      text.append(buffer, n);
    return text;
  }
  void Signal(int signal) { kill(pid_, signal); }
  // The exit status, or -1 when it did not exit normally.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  bool started() const { return pid_ > 0 && out_ != nullptr; }
  // Reads stdout up to the line starting with `prefix` and returns the integer after it; -1 at
  // end of file.
  int ReadPortAfter(const std::string& prefix) {
    for (std::string line = ReadLine(); !line.empty(); line = ReadLine()) {
      if (line.rfind(prefix, 0) == 0) return std::atoi(line.c_str() + prefix.size());
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* out_ = nullptr;
};

TEST(ServeCommandTest, ServesUntilSigtermThenDrainsAndExitsZero) {
  TandemProcess tandem({"serve", "--model", testing::Fixture("models/zamba2-tiny"), "--port", "0",
                        "--metrics-port", "0", "--threads", "2", "--memory-gib", "0.05",
                        "--grace-seconds", "60", "--http-port", std::to_string(testing::FreePort())});
  ASSERT_TRUE(tandem.started());
  EXPECT_GT(tandem.ReadPortAfter("tandem metrics on http://127.0.0.1:"), 0);
  const int http_port = tandem.ReadPortAfter("tandem openai api on http://127.0.0.1:");
  ASSERT_GT(http_port, 0);
  EXPECT_EQ(testing::HttpGet(http_port, "/health").status, 200);
  // The model's name is its directory's.
  testing::HttpResponse completion = testing::HttpPost(
      http_port, "/v1/completions", R"({"model": "zamba2-tiny", "prompt": [5, 6, 7], "max_tokens": 2})");
  EXPECT_EQ(completion.status, 200) << completion.body;
  const int port = tandem.ReadPortAfter("tandem serving on 127.0.0.1:");
  ASSERT_GT(port, 0);

  Client client(port);
  {
    auto health = grpc::health::v1::Health::NewStub(client.channel());
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, {}, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  StreamResult quick = client.Generate(GreedyIds({5, 6, 7, 8}, 4));
  ASSERT_TRUE(quick.status.ok()) << quick.status.error_message();
  EXPECT_EQ(quick.tokens.size(), 4u);

  // A long request is in flight when SIGTERM arrives: it still completes.
  grpc::ClientContext context;
  auto reader = client.stub().Generate(&context, GreedyIds({5, 6, 7, 8}, 1500));
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  tandem.Signal(SIGTERM);
  StreamResult rest = testing::ReadStream(*reader);
  EXPECT_TRUE(rest.status.ok()) << rest.status.error_message();
  EXPECT_EQ(rest.complete.finish_reason(), v1::LENGTH);
  EXPECT_EQ(rest.complete.usage().completion_tokens(), 1500);
  EXPECT_EQ(tandem.Wait(), 0);
}

// The README's first command: no --model serves the bundled model, whose chat template and
// end-of-turn token make Chat answer and stop.
TEST(ServeCommandTest, WithoutAModelServesTheBundledModel) {
  TandemProcess tandem({"serve", "--port", "0", "--no-metrics", "--threads", "2",
                        "--memory-gib", "0.1"});
  ASSERT_TRUE(tandem.started());
  const int port = tandem.ReadPortAfter("tandem serving on 127.0.0.1:");
  ASSERT_GT(port, 0);
  Client client(port);
  {
    grpc::ClientContext context;
    v1::ModelInfo info;
    ASSERT_TRUE(client.stub().GetModelInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.architecture(), "JambaForCausalLM");
    EXPECT_NE(info.model_path().find("bundled/tandem-tiny-chat"), std::string::npos);
    EXPECT_TRUE(info.has_chat_template());
  }
  v1::ChatRequest chat;
  v1::ChatMessage* message = chat.add_messages();
  message->set_role("user");
  message->set_content("Tell me about Elizabeth.");
  chat.mutable_sampling()->set_temperature(0.7f);
  chat.mutable_sampling()->set_seed(5);
  chat.mutable_sampling()->set_max_new_tokens(300);
  StreamResult answer = client.Chat(chat);
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_FALSE(answer.text.empty());
  EXPECT_GT(answer.complete.usage().prompt_tokens(), 5);
  tandem.Signal(SIGTERM);
  EXPECT_EQ(tandem.Wait(), 0);
}

TEST(ServeCommandTest, BadFlagsAreUsageErrors) {
  TandemProcess tandem(
      {"serve", "--model", testing::Fixture("models/zamba2-tiny"), "--port", "70000"});
  ASSERT_TRUE(tandem.started());
  EXPECT_EQ(tandem.Wait(), 2);
  const std::string model = testing::Fixture("models/zamba2-tiny");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"serve", "--model", model, "--tls-cert", testing::Fixture("tls/server.crt")},
           {"serve", "--model", model, "--auth-token-file", "/nonexistent/token"},
           {"serve", "--model", model, "--auth-token", "a", "--auth-token-file", "b"},
           {"serve", "--model", model, "--log-format", "xml"},
           {"serve", "--model", model, "--http-port", "70000"},
           {"serve", "--model", model, "--http-max-body-bytes", "0"},
           {"serve", "--model", model, "--tool-call-format", "qwen"},
           {"serve", "--model", model, "--reasoning-format", "deepseek_r1"},
           {"serve", "--model", model, "--config", "/nonexistent/serve.conf"},
           {"serve", "--model", model, "--max-pinned-fraction", "0.95"},
           {"serve", "--model", model, "--max-pinned-prefixes", "0"},
           {"serve", "--model", model, "--pin-system-prompt", "a=/nonexistent/prompt.txt"},
           {"serve", "--model", model, "--pin-system-prompt", "bad name=/etc/hostname"},
       }) {
    TandemProcess bad(args);
    ASSERT_TRUE(bad.started());
    EXPECT_EQ(bad.Wait(), 2) << args[3];
  }
  TandemProcess help({"serve", "--help"});
  ASSERT_TRUE(help.started());
  const std::string text = help.ReadAll();
  EXPECT_EQ(help.Wait(), 0);
  for (const char* flag : {"--model",
                           "--port",
                           "--host",
                           "--max-streams",
                           "--max-queue",
                           "--max-prompt-tokens",
                           "--max-new-tokens",
                           "--grace-seconds",
                           "--config",
                           "--tls-cert",
                           "--tls-key",
                           "--auth-token",
                           "--metrics-port",
                           "--log-format",
                           "--http-port",
                           "--http-host",
                           "--http-max-body-bytes",
                           "--served-model-name",
                           "--tool-call-format",
                           "--reasoning-format",
                           "--max-pinned-fraction",
                           "--max-pinned-prefixes",
                           "--pin-system-prompt",
                           "TANDEM_"}) {
    EXPECT_NE(text.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace tandem::server
