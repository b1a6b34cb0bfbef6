// `tandem serve` refuses settings that cannot work before it loads anything, with exit code 2
// and a message naming the setting and what was wrong: files that are not small regular files
// (a device would be read without end, a directory silently ignored), a memory budget larger
// than the machine, half a TLS pair, malformed token files.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cli/run_tandem.h"

namespace tandem {
namespace {

using tandem::testing::RunTandem;

std::string Fixture(const std::string& path) { return std::string(TANDEM_TEST_DATA) + "/" + path; }

class ServeFlagsTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("tandem_serve_flags_" + std::to_string(getpid()) + name);
    std::ofstream(path) << text;
    written_.push_back(path);
    return path.string();
  }
  void TearDown() override {
    for (const auto& path : written_) std::filesystem::remove(path);
  }
  std::vector<std::filesystem::path> written_;
};

TEST_F(ServeFlagsTest, ImpossibleSettingsAreUsageErrorsNamingWhatWasWrong) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string duplicate_tokens = WriteFile("dup", "alice:one\nbob:one\n");
  const std::string bad_name = WriteFile("name", "al ice:one\n");
  const std::string no_tokens = WriteFile("empty", "# nothing here\n\n");
  struct Case {
    std::string args;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"--config /dev/zero", "'/dev/zero': is a character device"},
           {"--config " + dir, "'" + dir + "': is a directory"},
           {"--memory-gib 100000", "less than this machine's memory"},
           {"--memory-gib 0", "--memory-gib must be > 0"},
           {"--auth-token-file /dev/zero", "is a character device"},
           {"--auth-token-file " + dir, "is a directory"},
           {"--auth-token-file " + duplicate_tokens, ":2: the same token as caller 'alice'"},
           {"--auth-token-file " + bad_name, ":1: a caller name is"},
           {"--auth-token-file " + no_tokens, "no token in the file"},
           {"--auth-token 'two words'", "printable ASCII without spaces"},
           {"--metrics-tls-cert " + Fixture("tls/server.crt"),
            "--metrics-tls-cert and --metrics-tls-key go together"},
           {"--metrics-auth-token-file /nonexistent/tokens", "/nonexistent/tokens"},
           {"--stream-stall-seconds 0", "--stream-stall-seconds must be in (0, 86400]"},
           {"--max-streams-per-connection 0", "--max-streams-per-connection must be in"},
           {"--gpu-graphs", "--gpu-graphs needs a GPU (--device cuda or cuda:N)"},
           {"--gpu-tensor-cores", "--gpu-tensor-cores needs a GPU (--device cuda or cuda:N)"},
           {"--speculative-tokens 65", "--speculative-tokens must be in [0, 64], got 65"},
           {"--speculative-tokens 0 --prompt-lookup",
            "--prompt-lookup needs drafts: --speculative-tokens is 0"},
           {"--prompt-lookup-min-match 0", "--prompt-lookup-min-match must be in [1, 64]"},
           {"--speculative-max-batch 0", "--speculative-max-batch must be in [1, 65535]"},
       }) {
    const auto out = RunTandem("serve --model " + Fixture("models/zamba2-tiny") + " " + c.args);
    EXPECT_EQ(out.exit_code, 2) << c.args << "\n" << out.err;
    EXPECT_NE(out.err.find(c.expected), std::string::npos) << c.args << "\n" << out.err;
  }
}

// --fast-kernels (and TANDEM_FAST_KERNELS) is read by serve on either device: a command that
// fails on another setting names that one, not the switch.
TEST_F(ServeFlagsTest, FastKernelsIsASwitchOfServe) {
  const auto flag = RunTandem("serve --model " + Fixture("models/zamba2-tiny") +
                              " --fast-kernels --memory-gib 0");
  EXPECT_EQ(flag.exit_code, 2) << flag.err;
  EXPECT_NE(flag.err.find("--memory-gib must be > 0"), std::string::npos) << flag.err;
  // (--memory-gib 0 too, so that a serve that ignored the variable would exit, not serve.)
  const auto env = RunTandem("serve --model " + Fixture("models/zamba2-tiny") + " --memory-gib 0",
                             "TANDEM_FAST_KERNELS=perhaps");
  EXPECT_EQ(env.exit_code, 2) << env.err;
  EXPECT_NE(env.err.find("TANDEM_FAST_KERNELS"), std::string::npos) << env.err;
}

}  // namespace
}  // namespace tandem
