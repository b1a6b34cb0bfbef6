// `tandem bench`: a load generator for a running tandem server. It sends Generate requests with
// token-id prompts over real gRPC, from generated multi-turn sessions or a Mooncake/session
// trace, in a closed loop (--concurrency) or an open one (--rate, or the trace's timestamps),
// and reports what the client saw: errors by gRPC code, TTFT, inter-token and end-to-end
// latency percentiles, throughput and the prefix cache's token hit rate.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache/trace.h"
#include "models/status_macros.h"
#include "server/cli/args.h"
#include "server/cli/bench_recorder.h"
#include "server/cli/bench_report.h"
#include "server/cli/bench_runner.h"
#include "server/cli/bench_workload.h"
#include "server/cli/client_flags.h"
#include "server/cli/commands.h"
#include "server/client/connection.h"
#include "server/client/status_names.h"

namespace tandem::cli {
namespace {

constexpr int64_t kDefaultRequests = 64;

const std::vector<FlagSpec>& BenchFlags() {
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> s = ClientFlags();
    s.insert(s.end(),
             {
                 {"trace", true, "replay this Mooncake or session JSONL trace (default: sessions)"},
                 {"turns", true, "sessions: turns per session (default 4)"},
                 {"system-tokens", true, "sessions: shared system prompt tokens (default 256)"},
                 {"user-tokens", true, "sessions: new tokens per user turn (default 64)"},
                 {"max-new-tokens", true,
                  "tokens generated per request; a trace's lengths are capped by it (default 32)"},
                 {"max-prompt-tokens", true,
                  "cut trace prompts / end sessions beyond this (default: the server's limit)"},
                 {"concurrency", true,
                  "closed loop: keep C requests in flight (default 8 for sessions)"},
                 {"rate", true, "open loop: Poisson arrivals at R requests/s"},
                 {"time-scale", true,
                  "trace without --rate/--concurrency: multiplies its timestamps (default 1)"},
                 {"duration", true, "stop sending after S seconds"},
                 {"requests", true,
                  "stop sending after N requests (default 64 when --duration is absent)"},
                 {"seed", true, "workload, arrival and sampling seed (default 1)"},
                 {"temperature", true, "sampling temperature (default 0: greedy)"},
                 {"stop-at-eos", false,
                  "end requests at end-of-sequence (default: always generate max-new-tokens)"},
                 {"timeout", true, "seconds one request may take before it counts as failed (300)"},
                 {"session-header", true,
                  "send each request's session id in this gRPC header (e.g. x-session-id), for "
                  "a proxy that keeps a session on one replica"},
                 {"json", false, "print one JSON object instead of the table"},
                 {"help", false, "show this help"},
             });
    return s;
  }();
  return specs;
}

struct Settings {
  ClientTarget target;
  std::optional<std::string> trace_path;
  SessionWorkloadOptions sessions;
  TraceWorkloadOptions trace;
  std::optional<int64_t> max_prompt_tokens;
  LoadOptions load;
  bool json = false;
};

absl::StatusOr<int64_t> IntAtLeast(const Args& args, const std::string& name, int64_t min,
                                   int64_t fallback) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> v, args.Int(name));
  if (v && *v < min) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= ", min, ", got ", *v));
  }
  return v.value_or(fallback);
}

// gRPC refuses to send a malformed key (the call fails inside the library), and the headers the
// connection itself sets must not be overridden: say which rule a name broke, up front.
absl::Status CheckSessionHeaderName(const std::string& name) {
  const bool valid_chars = !name.empty() && absl::c_all_of(name, [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.';
  });
  if (!valid_chars) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--session-header \"", name, "\" must be lowercase letters, digits, '-', '_' or '.'"));
  }
  for (const char* reserved : {"authorization", "content-type", "te", "user-agent", "host"}) {
    if (name == reserved) {
      return absl::InvalidArgumentError(
          absl::StrCat("--session-header \"", name, "\" is a header the client sets itself"));
    }
  }
  if (absl::StartsWith(name, "grpc-")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--session-header \"", name, "\": grpc- names are reserved for gRPC"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Settings> ReadSettings(const Args& args) {
  Settings s;
  TANDEM_ASSIGN_OR_RETURN(s.target, ReadClientTarget(args));
  s.trace_path = args.String("trace");
  TANDEM_ASSIGN_OR_RETURN(int64_t turns, IntAtLeast(args, "turns", 1, 4));
  TANDEM_ASSIGN_OR_RETURN(int64_t system, IntAtLeast(args, "system-tokens", 0, 256));
  TANDEM_ASSIGN_OR_RETURN(int64_t user, IntAtLeast(args, "user-tokens", 1, 64));
  TANDEM_ASSIGN_OR_RETURN(int64_t max_new, IntAtLeast(args, "max-new-tokens", 1, 32));
  TANDEM_ASSIGN_OR_RETURN(int64_t seed, IntAtLeast(args, "seed", 0, 1));
  if (max_new > INT32_MAX) return absl::InvalidArgumentError("--max-new-tokens is too large");
  s.sessions = {static_cast<uint64_t>(seed), static_cast<size_t>(turns),
                static_cast<size_t>(system), static_cast<size_t>(user),
                static_cast<int32_t>(max_new)};
  s.trace.max_new_tokens = static_cast<int32_t>(max_new);
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> time_scale, args.Double("time-scale"));
  if (time_scale && !(*time_scale >= 0)) {
    return absl::InvalidArgumentError("--time-scale must be >= 0");
  }
  s.trace.time_scale = time_scale.value_or(1.0);
  if (args.Has("max-prompt-tokens")) {
    TANDEM_ASSIGN_OR_RETURN(s.max_prompt_tokens, IntAtLeast(args, "max-prompt-tokens", 1, 0));
  }

  LoadOptions& load = s.load;
  if (args.Has("rate") && args.Has("concurrency")) {
    return absl::InvalidArgumentError("--rate and --concurrency exclude each other");
  }
  if (args.Has("rate")) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<double> rate, args.Double("rate"));
    if (!(*rate > 0)) return absl::InvalidArgumentError("--rate must be > 0");
    load.pacing = LoadOptions::Pacing::kPoisson;
    load.rate = *rate;
  } else if (args.Has("concurrency") || !s.trace_path) {
    load.pacing = LoadOptions::Pacing::kClosedLoop;
    TANDEM_ASSIGN_OR_RETURN(load.concurrency, IntAtLeast(args, "concurrency", 1, 8));
  } else {
    load.pacing = LoadOptions::Pacing::kWorkloadClock;
  }
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> duration, args.Double("duration"));
  if (duration && !(*duration > 0)) return absl::InvalidArgumentError("--duration must be > 0");
  load.duration_seconds = duration;
  if (args.Has("requests") || !duration) {
    TANDEM_ASSIGN_OR_RETURN(load.max_requests, IntAtLeast(args, "requests", 1, kDefaultRequests));
  }
  load.seed = static_cast<uint64_t>(seed);
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> temperature, args.Double("temperature"));
  if (temperature && !(*temperature >= 0 && *temperature <= 100)) {
    return absl::InvalidArgumentError("--temperature must be in [0, 100]");
  }
  load.temperature = static_cast<float>(temperature.value_or(0));
  load.ignore_eos = !args.Has("stop-at-eos");
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> timeout, args.Double("timeout"));
  if (timeout && !(*timeout > 0)) return absl::InvalidArgumentError("--timeout must be > 0");
  load.request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(timeout.value_or(300) * 1000));
  if (args.Has("session-header")) {
    load.session_header = *args.String("session-header");
    TANDEM_RETURN_IF_ERROR(CheckSessionHeaderName(load.session_header));
  }
  s.json = args.Has("json");
  return s;
}

std::string DescribeLoad(const LoadOptions& load) {
  std::string text;
  switch (load.pacing) {
    case LoadOptions::Pacing::kClosedLoop:
      text = absl::StrCat("closed loop, ", load.concurrency, " in flight");
      break;
    case LoadOptions::Pacing::kPoisson:
      text = absl::StrCat("open loop, Poisson arrivals at ", load.rate, " requests/s");
      break;
    case LoadOptions::Pacing::kWorkloadClock:
      text = "open loop, at the trace's timestamps";
      break;
  }
  if (load.duration_seconds) absl::StrAppend(&text, "; for ", *load.duration_seconds, " s");
  if (load.max_requests) absl::StrAppend(&text, "; up to ", *load.max_requests, " requests");
  return text;
}

// 1 after reporting why; the run itself never fails on a request's error.
int Run(const Settings& settings) {
  absl::StatusOr<std::unique_ptr<client::Connection>> connection =
      client::Connection::Open(settings.target.address, settings.target.security);
  if (!connection.ok()) {
    std::fprintf(stderr, "tandem bench: %s\n", std::string(connection.status().message()).c_str());
    return 1;
  }
  v1::ModelInfo info;
  {
    std::unique_ptr<grpc::ClientContext> context =
        (*connection)->NewContext(std::chrono::seconds(20));
    const grpc::Status status = (*connection)->stub().GetModelInfo(context.get(), {}, &info);
    if (!status.ok()) {
      std::fprintf(stderr, "tandem bench: %s: %s\n", settings.target.address.c_str(),
                   client::DescribeStatus(status).c_str());
      return 1;
    }
  }
  // What the server accepts bounds what we send, so that no request fails for our own choice.
  size_t max_prompt = static_cast<size_t>(std::max(info.max_prompt_tokens(), 1));
  if (settings.max_prompt_tokens) {
    max_prompt = std::min(max_prompt, static_cast<size_t>(*settings.max_prompt_tokens));
  }
  const int32_t max_new_limit = std::max(info.max_new_tokens_limit(), 1);
  absl::StatusOr<std::unique_ptr<BenchWorkload>> workload;
  if (settings.trace_path) {
    absl::StatusOr<cache::Trace> trace = cache::ReadTrace(*settings.trace_path);
    if (!trace.ok()) {
      std::fprintf(stderr, "tandem bench: %s\n", std::string(trace.status().message()).c_str());
      return 1;
    }
    TraceWorkloadOptions options = settings.trace;
    options.max_new_tokens = std::min(options.max_new_tokens, max_new_limit);
    workload = MakeTraceWorkload(*std::move(trace), options, info.vocab_size(), max_prompt);
  } else {
    SessionWorkloadOptions options = settings.sessions;
    options.max_new_tokens = std::min(options.max_new_tokens, max_new_limit);
    workload = MakeSessionWorkload(options, info.vocab_size(), max_prompt);
  }
  if (!workload.ok()) {
    std::fprintf(stderr, "tandem bench: %s\n", std::string(workload.status().message()).c_str());
    return 1;
  }

  const BenchSetup setup{settings.target.address,
                         absl::StrCat(info.model_path(), ", ", info.architecture()),
                         (*workload)->Describe(), DescribeLoad(settings.load)};
  if (!settings.json) std::fprintf(stderr, "tandem bench: %s ...\n", setup.load.c_str());
  BenchRecorder recorder;
  const LoadResult result = RunLoad(**connection, **workload, settings.load, recorder);
  if (settings.json) {
    std::printf("%s\n", BenchReportJson(setup, recorder, result).dump().c_str());
  } else {
    std::printf("%s", BenchReportText(setup, recorder, result).c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int RunBench(int argc, char** argv) {
  const std::string synopsis =
      "[--address HOST:PORT] [--trace FILE] [--concurrency C | --rate R] "
      "[--duration S] [--requests N] [--json]";
  absl::StatusOr<Args> args = Args::Parse(argc, argv, BenchFlags());
  if (args.ok() && args->Has("help")) {
    std::cout << Usage("bench", synopsis, BenchFlags());
    return 0;
  }
  absl::StatusOr<Settings> settings =
      args.ok() ? ReadSettings(*args) : absl::StatusOr<Settings>(args.status());
  if (!settings.ok()) {
    std::cerr << "tandem bench: " << settings.status().message() << "\n\n"
              << Usage("bench", synopsis, BenchFlags());
    return 2;
  }
  return Run(*settings);
}

}  // namespace tandem::cli
