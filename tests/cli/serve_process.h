// A real `tandem serve` child process on a loopback port the server picks (--port 0), for the
// tests of the client commands. The constructor returns once the server announced its port
// ("tandem serving on HOST:PORT" on stdout); the destructor stops it with SIGTERM.
#ifndef TANDEM_TESTS_CLI_SERVE_PROCESS_H_
#define TANDEM_TESTS_CLI_SERVE_PROCESS_H_

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tandem::testing {

inline std::string TestData(const std::string& path) {
  return std::string(TANDEM_TEST_DATA) + "/" + path;
}

class ServeProcess {
 public:
  // `args` follow `tandem serve`; --port 0 and --host 127.0.0.1 are added, and the metrics
  // endpoint is left off so that servers of concurrent tests never compete for its port.
  explicit ServeProcess(std::vector<std::string> args) {
    const std::string binary = std::string(TANDEM_BINARY_DIR) + "/tandem";
    args.insert(args.begin(), {binary, "serve", "--host", "127.0.0.1", "--port", "0",
                               "--no-metrics", "--grace-seconds", "10"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    // posix_spawn rather than fork: the test process has gRPC threads, and a forked child of a
    // multi-threaded process may do little before exec.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    const int spawned = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (spawned != 0) {
      pid_ = -1;
      close(fds[0]);
      return;
    }
    out_ = fdopen(fds[0], "r");
    const std::string prefix = "tandem serving on ";
    char line[1024];
    while (fgets(line, sizeof(line), out_) != nullptr) {
      std::string text(line);
      if (text.rfind(prefix, 0) != 0) continue;
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      address_ = text.substr(prefix.size());
      port_ = std::stoi(address_.substr(address_.rfind(':') + 1));
      break;
    }
    // Keep reading whatever else the server prints, so that it never blocks on a full pipe.
    drain_ = std::thread([out = out_] {
      char buffer[4096];
      while (fread(buffer, 1, sizeof(buffer), out) > 0) {
      }
    });
  }

  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (drain_.joinable()) drain_.join();
    if (out_ != nullptr) fclose(out_);
  }

  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // "127.0.0.1:PORT", as the server announced it.
  const std::string& address() const { return address_; }

  // SIGTERM, then the exit status (-1 when it did not exit normally).
  int Stop() {
    if (pid_ <= 0 || reaped_) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* out_ = nullptr;
  std::thread drain_;
  std::string address_;
  int port_ = 0;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_CLI_SERVE_PROCESS_H_
