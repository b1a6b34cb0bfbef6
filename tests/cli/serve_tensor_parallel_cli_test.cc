// `tandem serve --tensor-parallel 2` against the same model served whole: the split server says
// so in its model info, and a conversation through `tandem chat` gets the same answers from both,
// the later turns restored from the split server's prefix cache.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "server/client/connection.h"
#include "tests/cli/run_tandem.h"
#include "tests/cli/serve_process.h"

namespace tandem {
namespace {

using testing::RunTandem;
using testing::ServeProcess;
using testing::TestData;

// Two user turns from `input`, greedy.
std::string Converse(const ServeProcess& server, const std::string& input) {
  return "chat --address " + server.address() +
         " --system 'You are terse.' --temperature 0 --max-new-tokens 10 --ignore-eos < " + input;
}

TEST(ServeTensorParallelCliTest, ASplitServerAnswersAsTheWholeOne) {
  const std::vector<std::string> flags = {
      "--model", TestData("models/zamba2-tiny"), "--threads", "2", "--memory-gib", "0.05"};
  ServeProcess whole(flags);
  std::vector<std::string> split_flags = flags;
  split_flags.insert(split_flags.end(), {"--tensor-parallel", "2"});
  ServeProcess split(split_flags);
  ASSERT_TRUE(whole.ok()) << "tandem serve did not start";
  ASSERT_TRUE(split.ok()) << "tandem serve --tensor-parallel 2 did not start";

  auto connection = client::Connection::Open(split.address(), {});
  ASSERT_TRUE(connection.ok()) << connection.status();
  v1::GetModelInfoRequest request;
  v1::ModelInfo info;
  const grpc::Status status =
      (*connection)->stub().GetModelInfo((*connection)->NewContext().get(), request, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.tensor_parallel(), 2);

  const std::string input = std::filesystem::temp_directory_path() /
                            ("tandem_tensor_parallel_chat_" + std::to_string(::getpid()));
  std::ofstream(input) << "Name a colour.\nAnd another one?\n";
  const auto want = RunTandem(Converse(whole, input));
  const auto got = RunTandem(Converse(split, input));
  std::filesystem::remove(input);
  ASSERT_EQ(want.exit_code, 0) << want.err;
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_FALSE(got.out.empty());
  EXPECT_EQ(got.out, want.out);
  // The second turn found the first in the split server's cache.
  EXPECT_TRUE(std::regex_search(got.err, std::regex("tokens, [1-9][0-9]* cached"))) << got.err;
}

}  // namespace
}  // namespace tandem
