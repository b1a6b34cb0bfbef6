// `tandem serve`: load a checkpoint and serve it over gRPC until SIGTERM or SIGINT, then drain.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/status_macros.h"
#include "server/cli/args.h"
#include "server/cli/commands.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/served_model.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& ServeFlags() {
  static const std::vector<FlagSpec> specs = {
      {"model", true, "checkpoint directory (config.json, *.safetensors, tokenizer)"},
      {"host", true, "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"},
      {"port", true, "port to listen on (default 50051; 0 picks a free one and prints it)"},
      {"memory-gib", true, "memory for KV pages and SSM blocks (default 1)"},
      {"allocator", true, "avmp-dynamic (default), avmp-static:R or fixed-dual:R"},
      {"cache-policy", true,
       "prefix cache policy: marconi (default), sglang-plus, vllm-plus, none"},
      {"threads", true, "compute threads (default: all cores)"},
      {"page-size", true, "tokens per KV page (default 16)"},
      {"max-running", true, "sequences in the batch at once (default 32)"},
      {"step-tokens", true, "tokens per engine step (default 512)"},
      {"prefill-chunk", true, "prompt tokens per sequence per step (default 256)"},
      {"max-queue", true, "queued requests beyond which new ones get RESOURCE_EXHAUSTED (1024)"},
      {"max-streams", true, "concurrent Generate/Chat streams (default 256)"},
      {"max-prompt-tokens", true, "tokens of one prompt (default 8192)"},
      {"max-new-tokens", true, "largest max_new_tokens a request may ask for (default 4096)"},
      {"max-request-bytes", true, "bytes of prompt text in one request (default 1048576)"},
      {"grace-seconds", true, "on SIGTERM/SIGINT, time for in-flight requests to finish (30)"},
      {"help", false, "show this help"},
  };
  return specs;
}

struct Settings {
  std::string model_dir;
  models::LoadOptions load;
  server::ServerConfig server;
  double grace_seconds = 30;
};

// An integer flag in [lo, hi], or `fallback` when absent.
absl::StatusOr<int64_t> IntIn(const Args& args, const std::string& name, int64_t lo, int64_t hi,
                              int64_t fallback) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> value, args.Int(name));
  if (!value) return fallback;
  if (*value < lo || *value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be in [", lo, ", ", hi, "], got ", *value));
  }
  return *value;
}

absl::StatusOr<Settings> ReadSettings(const Args& args) {
  Settings s;
  std::optional<std::string> model = args.String("model");
  if (!model) return absl::InvalidArgumentError("--model DIR is required");
  s.model_dir = *model;
  s.server.host = args.String("host").value_or("127.0.0.1");
  TANDEM_ASSIGN_OR_RETURN(int64_t port, IntIn(args, "port", 0, 65535, 50051));
  s.server.port = static_cast<int>(port);

  engine::EngineConfig& e = s.server.engine;
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> gib, args.Double("memory-gib"));
  if (gib && !(*gib > 0 && *gib <= 1024)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory-gib must be in (0, 1024], got ", *gib));
  }
  e.memory_bytes = static_cast<size_t>(gib.value_or(1.0) * (1ull << 30));
  e.allocator = args.String("allocator").value_or("avmp-dynamic");
  TANDEM_ASSIGN_OR_RETURN(
      e.scheduler.cache.policy,
      engine::ParseCachePolicy(args.String("cache-policy").value_or("marconi")));
  TANDEM_ASSIGN_OR_RETURN(int64_t threads, IntIn(args, "threads", 0, 1024, 0));
  e.threads = static_cast<int>(threads);
  TANDEM_ASSIGN_OR_RETURN(int64_t page, IntIn(args, "page-size", 1, 65536, 16));
  s.load.page_tokens = static_cast<int32_t>(page);
  TANDEM_ASSIGN_OR_RETURN(int64_t running, IntIn(args, "max-running", 1, 65536, 32));
  e.scheduler.max_running = static_cast<int32_t>(running);
  TANDEM_ASSIGN_OR_RETURN(e.scheduler.step_tokens, IntIn(args, "step-tokens", 1, 1 << 20, 512));
  TANDEM_ASSIGN_OR_RETURN(e.scheduler.prefill_chunk, IntIn(args, "prefill-chunk", 1, 1 << 20, 256));
  TANDEM_ASSIGN_OR_RETURN(int64_t queue, IntIn(args, "max-queue", 1, 1 << 20, 1024));
  e.max_waiting = static_cast<size_t>(queue);
  TANDEM_ASSIGN_OR_RETURN(int64_t max_new, IntIn(args, "max-new-tokens", 1, 1 << 20, 4096));
  e.scheduler.max_new_tokens_limit = static_cast<int32_t>(max_new);

  server::RequestLimits& limits = s.server.limits;
  TANDEM_ASSIGN_OR_RETURN(int64_t streams, IntIn(args, "max-streams", 1, 1 << 20, 256));
  limits.max_concurrent_streams = static_cast<int32_t>(streams);
  TANDEM_ASSIGN_OR_RETURN(int64_t prompt, IntIn(args, "max-prompt-tokens", 1, 1 << 24, 8192));
  limits.max_prompt_tokens = static_cast<int32_t>(prompt);
  TANDEM_ASSIGN_OR_RETURN(limits.max_request_bytes,
                          IntIn(args, "max-request-bytes", 1, int64_t{1} << 30, 1 << 20));

  TANDEM_ASSIGN_OR_RETURN(std::optional<double> grace, args.Double("grace-seconds"));
  if (grace && !(*grace >= 0 && *grace <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grace-seconds must be in [0, 3600], got ", *grace));
  }
  s.grace_seconds = grace.value_or(30.0);
  return s;
}

absl::Status Run(const Settings& settings, const sigset_t& stop_signals) {
  models::LoadOptions load = settings.load;
  if (isatty(fileno(stderr))) {
    load.progress = [](const std::string& step) {
      std::fprintf(stderr, "\rloading model: %-24s", step.c_str());
      if (step == "done") std::fprintf(stderr, "\n");
    };
  }
  const auto load_start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN_OR_RETURN(server::ServedModel model,
                          server::ServedModel::Load(settings.model_dir, load));
  std::fprintf(
      stderr, "loaded %s: %s, %d layers, tokenizer %s, chat template %s, %.2f s\n",
      settings.model_dir.c_str(), model.model->config().architecture.c_str(),
      model.model->config().num_layers, model.tokenizer ? "yes" : "no",
      model.chat_template ? "yes" : "no",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<server::GrpcServer> server,
                          server::GrpcServer::Start(model, settings.server));
  // Scripts read this line to find the port (useful with --port 0).
  std::fprintf(stdout, "tandem serving on %s:%d\n", settings.server.host.c_str(), server->port());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::fprintf(stderr, "received %s: draining (grace %.0f s)\n",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT", settings.grace_seconds);
  server->Shutdown(std::chrono::milliseconds(static_cast<int64_t>(settings.grace_seconds * 1000)));
  std::fprintf(stderr, "stopped\n");
  return absl::OkStatus();
}

}  // namespace

int RunServe(int argc, char** argv) {
  const std::string synopsis = "--model DIR [--host 127.0.0.1] [--port 50051] [flags]";
  absl::StatusOr<Args> args = Args::Parse(argc, argv, ServeFlags());
  if (args.ok() && args->Has("help")) {
    std::cout << Usage("serve", synopsis, ServeFlags());
    return 0;
  }
  absl::StatusOr<Settings> settings =
      args.ok() ? ReadSettings(*args) : absl::StatusOr<Settings>(args.status());
  if (!settings.ok()) {
    std::cerr << "tandem serve: " << settings.status().message() << "\n\n"
              << Usage("serve", synopsis, ServeFlags());
    return 2;
  }
  // Block the stop signals before any thread starts, so that every thread inherits the mask and
  // only sigwait() in this thread receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  if (absl::Status status = Run(*settings, stop_signals); !status.ok()) {
    std::cerr << "tandem serve: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tandem::cli
