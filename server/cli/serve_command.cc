// `tandem serve`: load a checkpoint and serve it over gRPC (and OpenAI's HTTP API when asked)
// until SIGTERM or SIGINT, then drain.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/status_macros.h"
#include "server/cli/args.h"
#include "server/cli/bundled_model.h"
#include "server/cli/commands.h"
#include "server/cli/config_sources.h"
#include "server/cli/model_flags.h"
#include "server/cli/speculation_flags.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/pinned_prefixes.h"
#include "server/grpc/served_model.h"
#include "server/grpc/service_state.h"
#include "server/http/tls_context.h"
#include "server/logging/structured_log.h"
#include "server/openai/openai_endpoint.h"
#include "server/util/bearer_tokens.h"
#include "server/util/host_memory.h"
#include "server/util/small_file.h"

namespace tandem::cli {
namespace {

constexpr size_t kMaxTokenFileBytes = 1 << 20;

const std::vector<FlagSpec>& ServeFlags() {
  static const std::vector<FlagSpec> specs = WithSpeculationFlags({
      {"model", true,
       "checkpoint directory (config.json, *.safetensors, tokenizer); default: the bundled "
       "model, bundled/tandem-tiny-chat"},
      {"config", true, "a file of `flag = value` lines (flags and TANDEM_* variables win)"},
      {"host", true, "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"},
      {"port", true, "port to listen on (default 50051; 0 picks a free one and prints it)"},
      {"memory-gib", true, "memory for KV pages and SSM blocks (default 1)"},
      {"allocator", true, "avmp-dynamic (default), avmp-static:R or fixed-dual:R"},
      {"cache-policy", true,
       "prefix cache policy: marconi (default), sglang-plus, vllm-plus, none"},
      {"threads", true, "compute threads (default: all cores)"},
      TensorParallelFlagSpec(),
      WeightDTypeFlagSpec(),
      DeviceFlagSpec(),
      GpuTensorCoresFlagSpec(),
      GpuGraphsFlagSpec(),
      FastKernelsFlagSpec(),
      {"page-size", true, "tokens per KV page (default 16)"},
      {"max-running", true, "sequences in the batch at once (default 32)"},
      {"step-tokens", true, "tokens per engine step (default 512)"},
      {"prompt-logprob-rows", true,
       "prompt tokens that requests scoring their prompt (OpenAI echo with logprobs) run per "
       "step, each with a row of logits (default 256)"},
      {"prefill-chunk", true, "prompt tokens per sequence per step (default 256)"},
      {"max-queue", true, "queued requests beyond which new ones get RESOURCE_EXHAUSTED (1024)"},
      {"max-streams", true, "concurrent Generate/Chat streams (default 256)"},
      {"max-streams-per-connection", true,
       "HTTP/2 streams one client connection may open at once (default 128)"},
      {"stream-stall-seconds", true,
       "cancel a stream whose client has read nothing for this long (default 30)"},
      {"max-resets-per-connection", true,
       "calls a connection's client may cancel within 10 s before the connection's new calls "
       "are refused for 30 s: the HTTP/2 rapid-reset defence (default 500; 0 disables)"},
      {"max-prompt-tokens", true, "tokens of one prompt (default 8192)"},
      {"max-pinned-fraction", true,
       "share of --memory-gib that prefixes pinned with PinPrefix may hold together, never "
       "evicted (default 0.5; 0 turns pinning off)"},
      {"max-pinned-prefixes", true, "prefixes one caller may have pinned at once (default 64)"},
      {"pin-system-prompt", true,
       "NAME=FILE[,NAME=FILE...]: pin each file's text, as a chat's system message, before "
       "serving (the system prompts of a deployment, e.g. from a ConfigMap)"},
      {"max-new-tokens", true, "largest max_new_tokens a request may ask for (default 4096)"},
      {"max-request-bytes", true, "bytes of prompt text in one request (default 1048576)"},
      {"grace-seconds", true, "on SIGTERM/SIGINT, time for in-flight requests to finish (30)"},
      {"tls-cert", true, "PEM certificate chain: serve TLS only (needs --tls-key)"},
      {"tls-key", true, "PEM private key of --tls-cert"},
      {"auth-token", true, "require 'authorization: Bearer TOKEN' on every tandem.v1 call"},
      {"auth-token-file", true,
       "accept the bearer tokens in this file, one per line as TOKEN or NAME:TOKEN; each names "
       "a caller, whose request ids are its own (keeps tokens out of ps)"},
      {"metrics-host", true, "address of the Prometheus /metrics endpoint (default: --host)"},
      {"metrics-port", true, "port of /metrics (default 9464; 0 picks a free one and prints it)"},
      {"no-metrics", false, "serve no /metrics endpoint"},
      {"metrics-tls-cert", true, "PEM certificate chain: serve /metrics over HTTPS only"},
      {"metrics-tls-key", true, "PEM private key of --metrics-tls-cert"},
      {"metrics-auth-token-file", true,
       "scrapes must send 'Authorization: Bearer TOKEN' with a token of this file (format as "
       "--auth-token-file)"},
      {"http-port", true,
       "serve OpenAI's HTTP API (/v1/chat/completions, /v1/completions, /v1/models, /health) "
       "on this port (default 0: off); same tokens and TLS as gRPC"},
      {"http-host", true, "address of the OpenAI HTTP API (default: --host)"},
      {"http-max-body-bytes", true,
       "largest request body of the HTTP API; larger ones get 413 (default 4194304)"},
      {"tool-call-format", true,
       "how the model writes tool calls, which Chat and the HTTP API return as tool calls: auto "
       "(the "
       "format its chat template shows, default), none (answers stay text), hermes, jamba, "
       "nemotron-json or xml-function"},
      {"reasoning-format", true,
       "how the model sets its reasoning apart, which Chat and the HTTP API return apart from "
       "the answer (reasoning_content): auto (the format its chat template shows, default), none "
       "(answers stay whole) or think (<think>...</think>)"},
      {"served-model-name", true,
       "the model's name in the HTTP API (`model`, /v1/models; default: the --model directory's "
       "name)"},
      {"log-format", true, "text (logfmt, default) or json: one line per event on stderr"},
      {"log-level", true, "debug, info (default), warning or error"},
      {"help", false, "show this help"},
  });
  return specs;
}

struct Settings {
  std::string model_dir;
  std::string device = "cpu";
  int32_t tensor_parallel = 1;  // workers the model is split over
  models::LoadOptions load;
  server::ServerConfig server;
  server::OpenAiEndpointOptions http;  // served when http.port != 0
  double grace_seconds = 30;
  server::LogFormat log_format = server::LogFormat::kText;
  server::LogLevel log_level = server::LogLevel::kInfo;
};

// A token file (server/util/bearer_tokens.h has the format), read through the bounded reader.
absl::StatusOr<server::BearerTokens> ReadTokenFile(const Args& args, const std::string& flag) {
  const std::string path = *args.String(flag);
  absl::StatusOr<std::string> text = server::ReadSmallFile(path, kMaxTokenFileBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source(flag), ": ", text.status().message()));
  }
  absl::StatusOr<server::BearerTokens> tokens = server::BearerTokens::Parse(*text, path);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source(flag), ": ", tokens.status().message()));
  }
  return tokens;
}

absl::Status ReadSecurity(const Args& args, server::SecurityConfig* security) {
  security->tls_cert_file = args.String("tls-cert").value_or("");
  security->tls_key_file = args.String("tls-key").value_or("");
  if (security->tls_cert_file.empty() != security->tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (args.Has("auth-token") && args.Has("auth-token-file")) {
    return absl::InvalidArgumentError("give --auth-token or --auth-token-file, not both");
  }
  if (args.Has("auth-token-file")) {
    TANDEM_ASSIGN_OR_RETURN(security->tokens, ReadTokenFile(args, "auth-token-file"));
  } else if (std::optional<std::string> token = args.String("auth-token")) {
    absl::StatusOr<server::BearerTokens> tokens = server::BearerTokens::Single(*token);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.Source("auth-token"), ": ", tokens.status().message()));
    }
    security->tokens = *std::move(tokens);
  }
  return absl::OkStatus();
}

// The model's name in the HTTP API: the checkpoint directory's last component by default.
std::string DefaultModelName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// A format flag (--tool-call-format, --reasoning-format): auto leaves the server to read the
// format from the chat template.
template <typename Format>
absl::Status ReadFormatFlag(const Args& args, const std::string& flag,
                            absl::StatusOr<Format> (*parse)(std::string_view),
                            std::optional<Format>* out) {
  const std::string format = args.String(flag).value_or("auto");
  if (format == "auto") return absl::OkStatus();
  absl::StatusOr<Format> parsed = parse(format);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source(flag), ": ", parsed.status().message(), " (or auto)"));
  }
  *out = *parsed;
  return absl::OkStatus();
}

// --pin-system-prompt NAME=FILE[,NAME=FILE...]: names checked as PinPrefix checks them, files
// read here so that a bad path fails the command before the model loads.
absl::Status ReadStartupPins(const Args& args, std::vector<server::StartupPin>* pins) {
  const std::optional<std::string> value = args.String("pin-system-prompt");
  if (!value) return absl::OkStatus();
  for (absl::string_view entry : absl::StrSplit(*value, ',')) {
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos || eq + 1 == entry.size()) {
      return absl::InvalidArgumentError(absl::StrCat(args.Source("pin-system-prompt"),
                                                     ": expected NAME=FILE, got '", entry, "'"));
    }
    server::StartupPin pin;
    pin.name = std::string(entry.substr(0, eq));
    if (absl::Status s = server::ValidatePrefixName(pin.name); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.Source("pin-system-prompt"), ": ", s.message()));
    }
    for (const server::StartupPin& earlier : *pins) {
      if (earlier.name == pin.name) {
        return absl::InvalidArgumentError(
            absl::StrCat(args.Source("pin-system-prompt"), ": the name '", pin.name, "' twice"));
      }
    }
    constexpr size_t kMaxPromptFile = size_t{4} << 20;
    absl::StatusOr<std::string> text =
        server::ReadSmallFile(std::string(entry.substr(eq + 1)), kMaxPromptFile);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.Source("pin-system-prompt"), ": ", text.status().message()));
    }
    pin.system_prompt = *std::move(text);
    pins->push_back(std::move(pin));
  }
  return absl::OkStatus();
}

absl::Status ReadHttp(const Args& args, const Settings& s, server::OpenAiEndpointOptions* http) {
  http->host = args.String("http-host").value_or(s.server.host);
  TANDEM_ASSIGN_OR_RETURN(int64_t port, args.IntIn("http-port", 0, 65535, 0));
  http->port = static_cast<int>(port);
  TANDEM_ASSIGN_OR_RETURN(int64_t body,
                          args.IntIn("http-max-body-bytes", 1, int64_t{1} << 30, 4 << 20));
  http->max_body_bytes = static_cast<uint64_t>(body);
  http->model_name = args.String("served-model-name").value_or(DefaultModelName(s.model_dir));
  if (http->model_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source("served-model-name"), " must not be empty"));
  }
  // Every stream may be an HTTP connection, and probes and /v1/models need a few more.
  http->max_connections = s.server.limits.max_concurrent_streams + 16;
  return absl::OkStatus();
}

absl::Status ReadMetrics(const Args& args, const std::string& default_host,
                         server::MetricsConfig* metrics) {
  metrics->enabled = !args.Has("no-metrics");
  metrics->host = args.String("metrics-host").value_or(default_host);
  TANDEM_ASSIGN_OR_RETURN(int64_t port, args.IntIn("metrics-port", 0, 65535, 9464));
  metrics->port = static_cast<int>(port);
  metrics->tls_cert_file = args.String("metrics-tls-cert").value_or("");
  metrics->tls_key_file = args.String("metrics-tls-key").value_or("");
  if (metrics->tls_cert_file.empty() != metrics->tls_key_file.empty()) {
    return absl::InvalidArgumentError("--metrics-tls-cert and --metrics-tls-key go together");
  }
  if (args.Has("metrics-auth-token-file")) {
    TANDEM_ASSIGN_OR_RETURN(metrics->tokens, ReadTokenFile(args, "metrics-auth-token-file"));
  }
  return absl::OkStatus();
}

// --memory-gib must fit in this machine (or its container): the pools are reserved at start but
// committed as they fill, so an impossible budget would otherwise surface as the kernel's OOM
// killer under load rather than as an error now.
absl::StatusOr<size_t> MemoryBudget(const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> gib, args.Double("memory-gib"));
  const size_t host = server::HostMemoryBytes();
  if (gib && !(*gib > 0 && *gib * double(1ull << 30) < double(host))) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Source("memory-gib"), " must be > 0 and less than this machine's memory (",
        absl::SixDigits(double(host) / double(1ull << 30)), " GiB), got ", *gib));
  }
  return static_cast<size_t>(gib.value_or(1.0) * double(1ull << 30));
}

absl::StatusOr<Settings> ReadSettings(const Args& args) {
  Settings s;
  if (std::optional<std::string> model = args.String("model")) {
    s.model_dir = *model;
  } else {
    TANDEM_ASSIGN_OR_RETURN(s.model_dir, BundledModelDir());
  }
  s.server.host = args.String("host").value_or("127.0.0.1");
  TANDEM_ASSIGN_OR_RETURN(int64_t port, args.IntIn("port", 0, 65535, 50051));
  s.server.port = static_cast<int>(port);
  TANDEM_RETURN_IF_ERROR(ReadSecurity(args, &s.server.security));
  TANDEM_RETURN_IF_ERROR(ReadMetrics(args, s.server.host, &s.server.metrics));
  TANDEM_ASSIGN_OR_RETURN(s.log_format,
                          server::ParseLogFormat(args.String("log-format").value_or("text")));
  TANDEM_ASSIGN_OR_RETURN(s.log_level,
                          server::ParseLogLevel(args.String("log-level").value_or("info")));

  engine::EngineConfig& e = s.server.engine;
  TANDEM_ASSIGN_OR_RETURN(e.memory_bytes, MemoryBudget(args));
  e.allocator = args.String("allocator").value_or("avmp-dynamic");
  TANDEM_ASSIGN_OR_RETURN(
      e.scheduler.cache.policy,
      engine::ParseCachePolicy(args.String("cache-policy").value_or("marconi")));
  TANDEM_ASSIGN_OR_RETURN(int64_t threads, args.IntIn("threads", 0, 1024, 0));
  e.threads = static_cast<int>(threads);
  TANDEM_ASSIGN_OR_RETURN(int64_t page, args.IntIn("page-size", 1, 65536, 16));
  s.load.page_tokens = static_cast<int32_t>(page);
  TANDEM_ASSIGN_OR_RETURN(s.load.weight_storage, ReadWeightDType(args));
  s.device = args.String("device").value_or("cpu");
  TANDEM_ASSIGN_OR_RETURN(e.tensor_core_matmul, ReadGpuTensorCores(args, s.device));
  TANDEM_ASSIGN_OR_RETURN(e.cuda_graphs, ReadGpuGraphs(args, s.device));
  TANDEM_ASSIGN_OR_RETURN(e.batch_invariant, ReadBatchInvariant(args, e.tensor_core_matmul));
  TANDEM_ASSIGN_OR_RETURN(s.tensor_parallel, ReadTensorParallel(args, s.device));
  if (s.tensor_parallel > 1) e.threads = ThreadsPerWorker(e.threads, s.tensor_parallel);
  // At most 65535: a decode batch is one grid row per sequence in the attention kernels (more
  // would change its kernel, and the batch-invariant mode's bits).
  TANDEM_ASSIGN_OR_RETURN(int64_t running, args.IntIn("max-running", 1, 65535, 32));
  e.scheduler.max_running = static_cast<int32_t>(running);
  TANDEM_ASSIGN_OR_RETURN(e.scheduler.step_tokens, args.IntIn("step-tokens", 1, 1 << 20, 512));
  TANDEM_ASSIGN_OR_RETURN(e.scheduler.prefill_chunk, args.IntIn("prefill-chunk", 1, 1 << 20, 256));
  TANDEM_ASSIGN_OR_RETURN(e.scheduler.prompt_logprob_rows,
                          args.IntIn("prompt-logprob-rows", 1, 1 << 16, 256));
  TANDEM_ASSIGN_OR_RETURN(e.scheduler.speculation, ReadSpeculation(args));
  TANDEM_ASSIGN_OR_RETURN(int64_t queue, args.IntIn("max-queue", 1, 1 << 20, 1024));
  e.max_waiting = static_cast<size_t>(queue);
  TANDEM_ASSIGN_OR_RETURN(int64_t max_new, args.IntIn("max-new-tokens", 1, 1 << 20, 4096));
  e.scheduler.max_new_tokens_limit = static_cast<int32_t>(max_new);
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> pinned, args.Double("max-pinned-fraction"));
  if (pinned && !(*pinned >= 0 && *pinned <= 0.9)) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source("max-pinned-fraction"),
                     " must be in [0, 0.9] (requests need the rest of the memory), got ", *pinned));
  }
  e.scheduler.max_pinned_bytes =
      static_cast<size_t>(pinned.value_or(0.5) * static_cast<double>(e.memory_bytes));

  server::RequestLimits& limits = s.server.limits;
  TANDEM_ASSIGN_OR_RETURN(int64_t streams, args.IntIn("max-streams", 1, 1 << 20, 256));
  limits.max_concurrent_streams = static_cast<int32_t>(streams);
  TANDEM_ASSIGN_OR_RETURN(int64_t per_connection,
                          args.IntIn("max-streams-per-connection", 1, 1 << 20, 128));
  limits.max_streams_per_connection = static_cast<int32_t>(per_connection);
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> stall, args.Double("stream-stall-seconds"));
  if (stall && !(*stall > 0 && *stall <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source("stream-stall-seconds"), " must be in (0, 86400], got ", *stall));
  }
  limits.write_stall_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(stall.value_or(30.0) * 1000)));
  TANDEM_ASSIGN_OR_RETURN(int64_t resets,
                          args.IntIn("max-resets-per-connection", 0, 1 << 30, 500));
  limits.reset_flood.max_resets = static_cast<int32_t>(resets);
  TANDEM_ASSIGN_OR_RETURN(int64_t prompt, args.IntIn("max-prompt-tokens", 1, 1 << 24, 8192));
  limits.max_prompt_tokens = static_cast<int32_t>(prompt);
  TANDEM_ASSIGN_OR_RETURN(int64_t pins, args.IntIn("max-pinned-prefixes", 1, 1 << 16, 64));
  limits.max_pinned_prefixes = static_cast<int32_t>(pins);
  TANDEM_ASSIGN_OR_RETURN(limits.max_request_bytes,
                          args.IntIn("max-request-bytes", 1, int64_t{1} << 30, 1 << 20));

  TANDEM_RETURN_IF_ERROR(ReadStartupPins(args, &s.server.startup_pins));
  TANDEM_RETURN_IF_ERROR(ReadHttp(args, s, &s.http));
  TANDEM_RETURN_IF_ERROR(ReadFormatFlag(args, "tool-call-format", &server::ParseToolCallFormat,
                                        &s.server.tool_call_format));
  TANDEM_RETURN_IF_ERROR(ReadFormatFlag(args, "reasoning-format", &server::ParseReasoningFormat,
                                        &s.server.reasoning_format));

  TANDEM_ASSIGN_OR_RETURN(std::optional<double> grace, args.Double("grace-seconds"));
  if (grace && !(*grace >= 0 && *grace <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source("grace-seconds"), " must be in [0, 3600], got ", *grace));
  }
  s.grace_seconds = grace.value_or(30.0);
  return s;
}

// The OpenAI HTTP API over the gRPC service's state, with its TLS certificate when it has one.
absl::StatusOr<std::unique_ptr<server::OpenAiEndpoint>> StartHttp(const Settings& settings,
                                                                  server::ServiceState& state) {
  server::OpenAiEndpointOptions options = settings.http;
  const server::SecurityConfig& security = settings.server.security;
  if (!security.tls_cert_file.empty()) {
    absl::StatusOr<std::shared_ptr<server::TlsContext>> tls =
        server::TlsContext::Load(security.tls_cert_file, security.tls_key_file);
    if (!tls.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("http: ", tls.status().message()));
    }
    options.tls = *std::move(tls);
  }
  return server::OpenAiEndpoint::Start(state, options);
}

absl::Status Run(const Settings& settings, const sigset_t& stop_signals) {
  // Declared first, destroyed last: the model's weights and the engine's memory may be its.
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<engine::ComputeDevice> device,
                          OpenDevice(settings.device));
  server::LogLine(server::LogLevel::kInfo, "device")
      .Field("name", device->name())
      .Field("batch_invariant", settings.server.engine.batch_invariant);
  models::LoadOptions load = settings.load;
  load.placer = device->weight_placer();
  load.progress = [](const std::string& step) {
    server::LogLine(server::LogLevel::kInfo, "loading model").Field("step", step);
  };
  const auto load_start = std::chrono::steady_clock::now();
  server::LogLine(server::LogLevel::kInfo, "loading model").Field("dir", settings.model_dir);
  const engine::EngineConfig& engine = settings.server.engine;
  TANDEM_ASSIGN_OR_RETURN(
      server::ServedModel model,
      server::ServedModel::Load(settings.model_dir, load, settings.tensor_parallel,
                                CpuWorkerOps(engine.threads, engine.batch_invariant)));
  server::LogLine(server::LogLevel::kInfo, "model loaded")
      .Field("dir", settings.model_dir)
      .Field("architecture", model.model->config().architecture)
      .Field("layers", model.model->config().num_layers)
      .Field("tensor_parallel", static_cast<int64_t>(settings.tensor_parallel))
      .Field("tokenizer", model.tokenizer != nullptr)
      .Field("chat_template", model.chat_template.has_value())
      .Field("seconds",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  server::ServerConfig config = settings.server;
  config.engine.device = device.get();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<server::GrpcServer> server,
                          server::GrpcServer::Start(model, config));
  server::LogLine(server::LogLevel::kInfo, "serving")
      .Field("address", absl::StrCat(config.host, ":", server->port()))
      .Field("tls", !config.security.tls_cert_file.empty())
      .Field("auth_tokens", static_cast<int64_t>(config.security.tokens.size()))
      .Field("metrics_port", server->metrics_port())
      .Field("cache_policy", engine::CachePolicyName(config.engine.scheduler.cache.policy))
      .Field("tool_call_format",
             std::string(server::ToolCallFormatName(server->state().tool_calls().format())))
      .Field("reasoning_format",
             std::string(server::ReasoningFormatName(server->state().reasoning().format())))
      .Field("speculative_tokens",
             static_cast<int64_t>(config.engine.scheduler.speculation.draft_tokens))
      .Field("prompt_lookup", config.engine.scheduler.speculation.prompt_lookup);
  // Scripts read these lines to find the ports (useful with --port 0 and --metrics-port 0).
  if (server->metrics_port() != 0) {
    std::fprintf(stdout, "tandem metrics on http://%s:%d/metrics\n", config.metrics.host.c_str(),
                 server->metrics_port());
  }
  std::unique_ptr<server::OpenAiEndpoint> http;  // after `server`: destroyed before it
  if (settings.http.port != 0) {
    TANDEM_ASSIGN_OR_RETURN(http, StartHttp(settings, server->state()));
    std::fprintf(stdout, "tandem openai api on %s://%s:%d/v1\n",
                 !config.security.tls_cert_file.empty() ? "https" : "http",
                 settings.http.host.c_str(), http->port());
  }
  std::fprintf(stdout, "tandem serving on %s:%d\n", config.host.c_str(), server->port());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const engine::SchedulerStats stats = server->engine().stats();
  server::LogLine(server::LogLevel::kInfo, "draining")
      .Field("signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT")
      .Field("grace_seconds", settings.grace_seconds)
      .Field("in_flight", static_cast<int64_t>(stats.running + stats.waiting));
  // The HTTP API drains with the engine: its requests are engine requests, and its new ones are
  // refused (503) from the moment draining begins.
  server->Shutdown(std::chrono::milliseconds(static_cast<int64_t>(settings.grace_seconds * 1000)));
  http.reset();
  server::LogLine(server::LogLevel::kInfo, "stopped");
  return absl::OkStatus();
}

}  // namespace

int RunServe(int argc, char** argv) {
  const std::string synopsis =
      "[--model DIR] [--host 127.0.0.1] [--port 50051] [flags]\n\n"
      "Every flag may also come from the environment as TANDEM_<FLAG> (TANDEM_MEMORY_GIB=2) or\n"
      "from --config FILE (lines of `flag = value`); the command line wins, then the\n"
      "environment, then the file.";
  absl::StatusOr<Args> args = Args::Parse(argc, argv, ServeFlags());
  if (args.ok() && args->Has("help")) {
    std::cout << Usage("serve", synopsis, ServeFlags());
    return 0;
  }
  if (args.ok()) {
    if (absl::Status s = FillFromEnvironmentAndFile(ServeFlags(), ProcessEnvironment(), &*args);
        !s.ok()) {
      args = s;
    }
  }
  absl::StatusOr<Settings> settings =
      args.ok() ? ReadSettings(*args) : absl::StatusOr<Settings>(args.status());
  if (!settings.ok()) {
    std::cerr << "tandem serve: " << settings.status().message() << "\n\n"
              << Usage("serve", synopsis, ServeFlags());
    return 2;
  }
  server::ConfigureLogging(settings->log_format, settings->log_level);
  // Block the stop signals before any thread starts, so that every thread inherits the mask and
  // only sigwait() in this thread receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  if (absl::Status status = Run(*settings, stop_signals); !status.ok()) {
    server::LogLine(server::LogLevel::kError, "tandem serve failed")
        .Field("error", status.message());
    return 1;
  }
  return 0;
}

}  // namespace tandem::cli
