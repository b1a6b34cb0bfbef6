// Runs the built `tandem` binary with arguments and captures its exit code, stdout and stderr.
#ifndef TANDEM_TESTS_CLI_RUN_TANDEM_H_
#define TANDEM_TESTS_CLI_RUN_TANDEM_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tandem::testing {

struct TandemOutput {
  int exit_code;
  std::string out;
  std::string err;
};

// `env`: assignments for the command's environment ("NAME=value ..."), or "".
inline TandemOutput RunTandem(const std::string& args, const std::string& env = "") {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("tandem_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cmd = (env.empty() ? "" : env + " ") + std::string(TANDEM_BINARY_DIR) +
                          "/tandem " + args + " >" + dir + "/out 2>" + dir + "/err";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  TandemOutput o{WEXITSTATUS(status), slurp(dir + "/out"), slurp(dir + "/err")};
  std::filesystem::remove_all(dir);
  return o;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_CLI_RUN_TANDEM_H_
