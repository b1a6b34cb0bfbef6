// `tandem chat` and `tandem bench` against a server that speaks TLS only and wants a bearer
// token (`tandem serve --tls-cert --tls-key --auth-token`): --tls-ca, --token and TANDEM_TOKEN
// get them through; a missing or wrong token is UNAUTHENTICATED, and a plaintext client does not
// connect at all.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli/run_tandem.h"
#include "tests/cli/serve_process.h"

namespace tandem {
namespace {

using testing::RunTandem;
using testing::ServeProcess;
using testing::TestData;

const std::string kCert = TestData("tls/server.crt");
constexpr char kToken[] = "cli-s3cret";

class ClientSecurityCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ofstream(input_path_) << "Hello there.\n";
    server_ = new ServeProcess({"--model", TestData("models/zamba2-tiny"), "--threads", "2",
                                "--memory-gib", "0.05", "--tls-cert", kCert, "--tls-key",
                                TestData("tls/server.key"), "--auth-token", kToken});
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(input_path_);
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->ok()) << "tandem serve did not start";
    unsetenv("TANDEM_TOKEN");
  }
  void TearDown() override { unsetenv("TANDEM_TOKEN"); }

  static std::string Chat(const std::string& flags) {
    return "chat --address " + server_->address() + " --temperature 0 --max-new-tokens 3 " + flags +
           " < " + input_path_;
  }

  static ServeProcess* server_;
  static inline const std::string input_path_ =
      std::filesystem::temp_directory_path() /
      ("tandem_security_input_" + std::to_string(::getpid()));
};

ServeProcess* ClientSecurityCliTest::server_ = nullptr;

TEST_F(ClientSecurityCliTest, ChatWithTheCaAndTheToken) {
  const auto o = RunTandem(Chat("--tls-ca " + kCert + " --token " + kToken));
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("3 tokens"), std::string::npos) << o.err;
}

TEST_F(ClientSecurityCliTest, ChatTakesTheTokenFromTheEnvironment) {
  setenv("TANDEM_TOKEN", kToken, 1);
  const auto o = RunTandem(Chat("--tls-ca " + kCert));
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

TEST_F(ClientSecurityCliTest, AMissingOrWrongTokenIsUnauthenticated) {
  auto o = RunTandem(Chat("--tls-ca " + kCert));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("UNAUTHENTICATED"), std::string::npos) << o.err;
  // --token wins over the environment.
  setenv("TANDEM_TOKEN", kToken, 1);
  o = RunTandem(Chat("--tls-ca " + kCert + " --token wrong"));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("UNAUTHENTICATED"), std::string::npos) << o.err;
}

TEST_F(ClientSecurityCliTest, APlaintextClientDoesNotConnect) {
  const auto o = RunTandem(Chat(std::string("--token ") + kToken));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("UNAVAILABLE"), std::string::npos) << o.err;
}

TEST_F(ClientSecurityCliTest, BenchWithTheCaAndTheToken) {
  const auto o = RunTandem("bench --json --address " + server_->address() + " --tls-ca " + kCert +
                           " --token " + kToken +
                           " --concurrency 2 --requests 4 --system-tokens 16 --user-tokens 8"
                           " --max-new-tokens 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const nlohmann::json r = nlohmann::json::parse(o.out);
  EXPECT_EQ(r["ok"], 4);
  EXPECT_EQ(r["errors"], 0) << r.dump();
}

}  // namespace
}  // namespace tandem
