// `tandem chat`: a multi-turn chat with a tandem server over gRPC. Each line read from stdin is
// a user turn; the whole conversation goes to Chat, the answer streams to stdout as it arrives,
// and a stat line per turn (time to first token, tokens/s, prompt and cached tokens) goes to
// stderr. Works the same with stdin from a pipe, so scripts and tests can drive it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/status_macros.h"
#include "server/cli/args.h"
#include "server/cli/chat_turn.h"
#include "server/cli/client_flags.h"
#include "server/cli/commands.h"
#include "server/client/connection.h"
#include "server/client/status_names.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& ChatFlags() {
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> s = ClientFlags();
    s.insert(s.end(),
             {
                 {"system", true, "system message that starts the conversation"},
                 {"temperature", true, "sampling temperature, 0 = greedy (default 0.7)"},
                 {"top-p", true, "nucleus sampling probability in (0, 1] (default 1)"},
                 {"top-k", true, "sample among the k most likely tokens (0 = all)"},
                 {"max-new-tokens", true, "longest answer in tokens (default 512)"},
                 {"seed", true, "sampling seed: same seed, same answers (default: random)"},
                 {"ignore-eos", false, "keep generating past end-of-sequence tokens"},
                 {"timeout", true, "seconds one answer may take (default 600)"},
                 {"help", false, "show this help"},
             });
    return s;
  }();
  return specs;
}

struct Settings {
  ClientTarget target;
  std::optional<std::string> system;
  v1::SamplingParams sampling;
  std::chrono::milliseconds timeout{600'000};
};

absl::StatusOr<Settings> ReadSettings(const Args& args) {
  Settings s;
  TANDEM_ASSIGN_OR_RETURN(s.target, ReadClientTarget(args));
  s.system = args.String("system");
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> temperature, args.Double("temperature"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> top_p, args.Double("top-p"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, args.Int("top-k"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> max_new, args.Int("max-new-tokens"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> seed, args.Int("seed"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> timeout, args.Double("timeout"));
  // The server checks these too, but a bad flag would then fail every turn of the session.
  if (temperature && !(*temperature >= 0 && *temperature <= 100)) {
    return absl::InvalidArgumentError("--temperature must be in [0, 100]");
  }
  if (top_p && !(*top_p > 0 && *top_p <= 1)) {
    return absl::InvalidArgumentError("--top-p must be in (0, 1]");
  }
  if (top_k && (*top_k < 0 || *top_k > INT32_MAX)) {
    return absl::InvalidArgumentError("--top-k must be >= 0");
  }
  if (max_new && (*max_new < 1 || *max_new > INT32_MAX)) {
    return absl::InvalidArgumentError("--max-new-tokens must be >= 1");
  }
  if (seed && *seed < 0) return absl::InvalidArgumentError("--seed must be >= 0");
  if (timeout && !(*timeout > 0)) return absl::InvalidArgumentError("--timeout must be > 0");
  s.sampling.set_temperature(static_cast<float>(temperature.value_or(0.7)));
  s.sampling.set_top_p(static_cast<float>(top_p.value_or(1.0)));
  if (top_k) s.sampling.set_top_k(static_cast<int32_t>(*top_k));
  s.sampling.set_max_new_tokens(static_cast<int32_t>(max_new.value_or(512)));
  if (seed) s.sampling.set_seed(static_cast<uint64_t>(*seed));
  if (args.Has("ignore-eos")) s.sampling.set_ignore_eos(true);
  if (timeout) s.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000));
  return s;
}

// Failures after which no later turn can succeed: end the session.
bool IsConnectionError(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::UNAUTHENTICATED ||
         code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::UNIMPLEMENTED;
}

class ChatSession {
 public:
  ChatSession(const client::Connection& connection, const Settings& settings)
      : connection_(connection),
        settings_(settings),
        interactive_(isatty(fileno(stdin)) != 0),
        dim_(isatty(fileno(stderr)) != 0) {}

  // The exit code: 0, or 1 when the server cannot be used (or, reading a pipe, a turn failed).
  int Run() {
    std::unique_ptr<grpc::ClientContext> context = connection_.NewContext(std::chrono::seconds(20));
    v1::ModelInfo info;
    const grpc::Status status = connection_.stub().GetModelInfo(context.get(), {}, &info);
    if (!status.ok()) {
      std::fprintf(stderr, "tandem chat: %s: %s\n", connection_.address().c_str(),
                   client::DescribeStatus(status).c_str());
      return 1;
    }
    if (!info.has_chat_template()) {
      std::fprintf(stderr, "tandem chat: the model served at %s (%s) has no chat template\n",
                   connection_.address().c_str(), info.model_path().c_str());
      return 1;
    }
    if (interactive_) {
      Note(absl::StrCat("connected to ", connection_.address(), ": ", info.architecture(), " from ",
                        info.model_path(),
                        ". Type a message; /reset starts over, /quit or end of input leaves."));
    }
    bool any_failed = false;
    std::string line;
    while (true) {
      if (interactive_) {
        std::fputs("> ", stdout);
        std::fflush(stdout);
      }
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      if (line == "/quit" || line == "/exit") break;
      if (line == "/reset") {
        history_.clear();
        Note("conversation cleared");
        continue;
      }
      if (line == "/help") {
        Note("/reset forgets the conversation, /quit leaves; //text sends /text");
        continue;
      }
      if (line[0] == '/' && line.rfind("//", 0) != 0) {
        Note(absl::StrCat("unknown command ", line, " (/help lists them)"));
        continue;
      }
      if (line.rfind("//", 0) == 0) line.erase(0, 1);
      const grpc::StatusCode code = Turn(line);
      if (code == grpc::StatusCode::OK) continue;
      any_failed = true;
      if (IsConnectionError(code)) return 1;
    }
    if (interactive_) std::fputs("\n", stdout);
    return any_failed && !interactive_ ? 1 : 0;
  }

 private:
  grpc::StatusCode Turn(const std::string& user_text) {
    v1::ChatRequest request;
    if (settings_.system) AddMessage(request, "system", *settings_.system);
    for (const auto& [role, content] : history_) AddMessage(request, role, content);
    AddMessage(request, "user", user_text);
    *request.mutable_sampling() = settings_.sampling;

    // The reasoning goes to stderr (dim on a terminal) as it comes: stdout holds only answers.
    ChatTurnResult turn = RunChatTurn(
        connection_, request, settings_.timeout,
        [](std::string_view text) {
          std::fwrite(text.data(), 1, text.size(), stdout);
          std::fflush(stdout);
        },
        [this](std::string_view reasoning) {
          if (dim_) std::fputs("\033[2m", stderr);
          std::fwrite(reasoning.data(), 1, reasoning.size(), stderr);
          if (dim_) std::fputs("\033[0m", stderr);
          std::fflush(stderr);
        });
    if (!turn.reasoning.empty() && turn.reasoning.back() != '\n') std::fputs("\n", stderr);
    if (!turn.text.empty() && turn.text.back() != '\n') std::fputs("\n", stdout);
    std::fflush(stdout);
    if (!turn.status.ok()) {
      std::fprintf(stderr, "error: %s\n", client::DescribeStatus(turn.status).c_str());
      return turn.status.error_code();
    }
    Note(DescribeTurn(turn));
    // Only a completed turn joins the conversation; a failed one can simply be typed again.
    history_.emplace_back("user", user_text);
    history_.emplace_back("assistant", turn.text);
    return grpc::StatusCode::OK;
  }

  static void AddMessage(v1::ChatRequest& request, const std::string& role,
                         const std::string& content) {
    v1::ChatMessage* message = request.add_messages();
    message->set_role(role);
    message->set_content(content);
  }

  // Status for the user, apart from the answer on stdout: dim on a terminal.
  void Note(const std::string& text) const {
    if (dim_) {
      std::fprintf(stderr, "\033[2m[%s]\033[0m\n", text.c_str());
    } else {
      std::fprintf(stderr, "[%s]\n", text.c_str());
    }
  }

  const client::Connection& connection_;
  const Settings& settings_;
  const bool interactive_;
  const bool dim_;
  std::vector<std::pair<std::string, std::string>> history_;  // (role, content) after system
};

}  // namespace

int RunChat(int argc, char** argv) {
  const std::string synopsis = "[--address HOST:PORT] [--system TEXT] [sampling flags]";
  absl::StatusOr<Args> args = Args::Parse(argc, argv, ChatFlags());
  if (args.ok() && args->Has("help")) {
    std::cout << Usage("chat", synopsis, ChatFlags());
    return 0;
  }
  absl::StatusOr<Settings> settings =
      args.ok() ? ReadSettings(*args) : absl::StatusOr<Settings>(args.status());
  if (!settings.ok()) {
    std::cerr << "tandem chat: " << settings.status().message() << "\n\n"
              << Usage("chat", synopsis, ChatFlags());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<client::Connection>> connection =
      client::Connection::Open(settings->target.address, settings->target.security);
  if (!connection.ok()) {
    std::cerr << "tandem chat: " << connection.status().message() << "\n";
    return 1;
  }
  return ChatSession(**connection, *settings).Run();
}

}  // namespace tandem::cli
