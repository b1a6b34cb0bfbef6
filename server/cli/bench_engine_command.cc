// `tandem bench-engine`: replays a generated multi-turn workload or a request trace through the
// real engine and a real model, once per cache policy, and reports time to first token, tokens/s
// and the token hit rate side by side (docs/BENCHMARKS.md, "Engine").
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cache/trace.h"
#include "engine/engine.h"
#include "models/model.h"
#include "models/model_presets.h"
#include "models/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/cli/args.h"
#include "server/cli/commands.h"
#include "server/cli/engine_replay.h"
#include "server/cli/model_flags.h"
#include "server/cli/speculation_flags.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& BenchFlags() {
  static const std::vector<FlagSpec> specs = WithSpeculationFlags({
      {"model", true, "checkpoint directory (default: a random-weight preset, see --preset)"},
      {"preset", true,
       "random-weight model: jamba-100m (default), zamba2-100m, mamba2-100m, granite-100m, "
       "nemotron-h-100m, nemotron3-100m, bamba-100m"},
      {"policies", true, "comma-separated cache policies (default none,sglang-plus,marconi)"},
      {"trace", true, "replay this Mooncake or session JSONL trace instead of --workload"},
      {"workload", true, "multiturn (default): sessions sharing a system prompt"},
      {"sessions", true, "multiturn: sessions (default 8)"},
      {"turns", true, "multiturn: turns per session (default 4)"},
      {"system-tokens", true, "multiturn: shared system prompt tokens (default 256)"},
      {"user-tokens", true, "multiturn: new tokens per user turn (default 64)"},
      {"output-tokens", true, "multiturn: tokens generated per turn (default 16)"},
      {"sessions-per-second", true, "multiturn: session arrival rate (default 0.5)"},
      {"think-seconds", true, "multiturn: pause between an answer and the next turn (default 1)"},
      {"seed", true, "workload seed (default 1)"},
      {"max-requests", true, "trace: requests replayed (default 64)"},
      {"max-prompt-tokens", true, "trace: prompts are cut to this length (default 2048)"},
      {"max-output-tokens", true, "trace: generated tokens per request at most (default 32)"},
      {"time-scale", true, "trace: multiplies arrival times (default 1; 0 = all at once)"},
      {"memory-gib", true, "memory for KV pages and SSM blocks (default 2)"},
      {"threads", true, "compute threads (default: all cores)"},
      WeightDTypeFlagSpec(),
      DeviceFlagSpec(),
      GpuTensorCoresFlagSpec(),
      GpuGraphsFlagSpec(),
      TensorParallelFlagSpec(),
      FastKernelsFlagSpec(),
      {"max-running", true, "sequences in the batch at once (default 32)"},
      {"step-tokens", true, "tokens per step (default 512)"},
      {"prefill-chunk", true, "prompt tokens per sequence per step (default 256)"},
      {"json", false, "print one JSON object per policy instead of a table"},
      {"help", false, "show this help"},
  });
  return specs;
}

struct PolicyResult {
  std::string policy;
  ReplayResult replay;
};

absl::StatusOr<int64_t> PositiveInt(const Args& args, const std::string& name, int64_t fallback,
                                    int64_t min = 1) {
  TANDEM_ASSIGN_OR_RETURN(auto v, args.Int(name));
  if (v && *v < min) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= ", min, ", got ", *v));
  }
  return v.value_or(fallback);
}

absl::StatusOr<double> NonNegativeDouble(const Args& args, const std::string& name,
                                         double fallback) {
  TANDEM_ASSIGN_OR_RETURN(auto v, args.Double(name));
  if (v && !(*v >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= 0, got ", *v));
  }
  return v.value_or(fallback);
}

nlohmann::json Summary(const PolicyResult& r) {
  std::vector<double> ttft;
  int64_t generated = 0, failed = 0;
  for (const RequestRecord& rec : r.replay.records) {
    if (!rec.ok) {
      ++failed;
      continue;
    }
    ttft.push_back(rec.ttft_seconds);
    generated += rec.completion_tokens;
  }
  const engine::SchedulerStats& s = r.replay.stats;
  return {{"policy", r.policy},
          {"requests", r.replay.records.size()},
          {"failed", failed},
          {"ttft_p50_s", Quantile(ttft, 0.5)},
          {"ttft_p95_s", Quantile(ttft, 0.95)},
          {"output_tokens_per_s", generated / r.replay.wall_seconds},
          {"token_hit_rate", s.token_hit_rate()},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens},
          {"hit_without_checkpoint_tokens", s.hit_without_checkpoint},
          {"prefill_tokens_run", s.prefill_tokens},
          {"preemptions", s.preemptions},
          {"draft_tokens", s.draft_tokens},
          {"accepted_draft_tokens", s.accepted_draft_tokens},
          {"gpu_graph_replays", s.graph_replays},
          {"gpu_graph_captures", s.graph_captures},
          {"engine_steps", s.steps},
          {"alpha_final", s.alpha},
          {"alpha_tunings", s.alpha_tunings},
          {"evictions", s.cache.evictions},
          {"migrations", s.memory.migrations},
          {"wall_seconds", r.replay.wall_seconds}};
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "tandem bench-engine: %s\n", std::string(status.message()).c_str());
  return absl::IsInvalidArgument(status) ? 2 : 1;
}

}  // namespace

int RunBenchEngine(int argc, char** argv) {
  const std::string synopsis =
      "[--model DIR | --preset NAME] [--trace FILE | --workload multiturn] [--policies LIST]";
  auto args = Args::Parse(argc, argv, BenchFlags());
  if (!args.ok()) {
    std::fprintf(stderr, "tandem bench-engine: %s\n%s",
                 std::string(args.status().message()).c_str(),
                 Usage("bench-engine", synopsis, BenchFlags()).c_str());
    return 2;
  }
  if (args->Has("help")) {
    std::printf("%s", Usage("bench-engine", synopsis, BenchFlags()).c_str());
    return 0;
  }
  std::vector<engine::CachePolicy> policies;
  for (absl::string_view name :
       absl::StrSplit(args->String("policies").value_or("none,sglang-plus,marconi"), ',')) {
    auto policy = engine::ParseCachePolicy(std::string(name));
    if (!policy.ok()) return Fail(policy.status());
    policies.push_back(*policy);
  }
  MultiTurnWorkload w;
  TraceReplayOptions t;
  engine::EngineConfig config;
  models::LoadOptions load;
  int32_t tensor_parallel = 1;  // workers the model is split over
  absl::Status status = [&]() -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(load.weight_storage, ReadWeightDType(*args));
    TANDEM_ASSIGN_OR_RETURN(int64_t sessions, PositiveInt(*args, "sessions", 8));
    TANDEM_ASSIGN_OR_RETURN(int64_t turns, PositiveInt(*args, "turns", 4));
    TANDEM_ASSIGN_OR_RETURN(int64_t system, PositiveInt(*args, "system-tokens", 256, 0));
    TANDEM_ASSIGN_OR_RETURN(int64_t user, PositiveInt(*args, "user-tokens", 64));
    TANDEM_ASSIGN_OR_RETURN(int64_t output, PositiveInt(*args, "output-tokens", 16));
    TANDEM_ASSIGN_OR_RETURN(int64_t seed, PositiveInt(*args, "seed", 1, 0));
    TANDEM_ASSIGN_OR_RETURN(w.sessions_per_second,
                            NonNegativeDouble(*args, "sessions-per-second", 0.5));
    if (!(w.sessions_per_second > 0)) {
      return absl::InvalidArgumentError("--sessions-per-second must be > 0");
    }
    TANDEM_ASSIGN_OR_RETURN(w.think_seconds, NonNegativeDouble(*args, "think-seconds", 1.0));
    w.sessions = sessions, w.turns = turns, w.system_tokens = system, w.user_tokens = user;
    w.output_tokens = output, w.seed = seed;
    TANDEM_ASSIGN_OR_RETURN(int64_t max_requests, PositiveInt(*args, "max-requests", 64));
    TANDEM_ASSIGN_OR_RETURN(int64_t max_prompt, PositiveInt(*args, "max-prompt-tokens", 2048));
    TANDEM_ASSIGN_OR_RETURN(int64_t max_output, PositiveInt(*args, "max-output-tokens", 32));
    TANDEM_ASSIGN_OR_RETURN(t.time_scale, NonNegativeDouble(*args, "time-scale", 1.0));
    t.max_requests = max_requests, t.max_prompt_tokens = max_prompt;
    t.max_output_tokens = max_output;
    TANDEM_ASSIGN_OR_RETURN(double gib, NonNegativeDouble(*args, "memory-gib", 2.0));
    if (!(gib > 0) || gib > 1024)
      return absl::InvalidArgumentError("--memory-gib must be in (0, 1024]");
    config.memory_bytes = static_cast<size_t>(gib * (1ull << 30));
    TANDEM_ASSIGN_OR_RETURN(int64_t threads, PositiveInt(*args, "threads", 0, 0));
    config.threads = static_cast<int>(std::min<int64_t>(threads, 1024));
    TANDEM_ASSIGN_OR_RETURN(config.tensor_core_matmul,
                            ReadGpuTensorCores(*args, args->String("device").value_or("cpu")));
    TANDEM_ASSIGN_OR_RETURN(config.batch_invariant,
                            ReadBatchInvariant(*args, config.tensor_core_matmul));
    TANDEM_ASSIGN_OR_RETURN(config.cuda_graphs,
                            ReadGpuGraphs(*args, args->String("device").value_or("cpu")));
    TANDEM_ASSIGN_OR_RETURN(tensor_parallel,
                            ReadTensorParallel(*args, args->String("device").value_or("cpu")));
    if (tensor_parallel > 1) config.threads = ThreadsPerWorker(config.threads, tensor_parallel);
    TANDEM_ASSIGN_OR_RETURN(int64_t running, PositiveInt(*args, "max-running", 32));
    config.scheduler.max_running = static_cast<int32_t>(std::min<int64_t>(running, 4096));
    TANDEM_ASSIGN_OR_RETURN(config.scheduler.step_tokens, PositiveInt(*args, "step-tokens", 512));
    TANDEM_ASSIGN_OR_RETURN(config.scheduler.prefill_chunk,
                            PositiveInt(*args, "prefill-chunk", 256));
    TANDEM_ASSIGN_OR_RETURN(config.scheduler.speculation, ReadSpeculation(*args));
    const std::string workload = args->String("workload").value_or("multiturn");
    if (workload != "multiturn") {
      return absl::InvalidArgumentError(
          absl::StrCat("--workload: unknown workload '", workload, "' (expected multiturn)"));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) return Fail(status);

  std::optional<cache::Trace> trace;
  if (auto path = args->String("trace")) {
    auto read = cache::ReadTrace(*path);
    if (!read.ok()) return Fail(read.status());
    trace = std::move(*read);
  }
  // Before the model, which may keep its weights in the device's memory.
  absl::StatusOr<std::unique_ptr<engine::ComputeDevice>> device =
      OpenDevice(args->String("device").value_or("cpu"));
  if (!device.ok()) return Fail(device.status());
  load.placer = (*device)->weight_placer();
  config.device = device->get();
  const std::optional<std::string> dir = args->String("model");
  const std::string model_name = dir ? *dir : args->String("preset").value_or("jamba-100m");
  const models::TensorParallelGroup::SliceLoader load_slice =
      [&](const models::LoadOptions& slice) -> absl::StatusOr<std::unique_ptr<models::Model>> {
    return dir ? models::Model::Load(*dir, slice) : models::RandomPresetModel(model_name, 1, slice);
  };
  absl::StatusOr<std::shared_ptr<const models::Model>> model = models::LoadModel(
      load_slice, load, tensor_parallel, CpuWorkerOps(config.threads, config.batch_invariant));
  if (!model.ok()) return Fail(model.status());

  const bool json = args->Has("json");
  if (!json) {
    std::printf("model %s (%.1fM parameters) on %s, %s\n\n", model_name.c_str(),
                (*model)->parameters() / 1e6, (*device)->name().c_str(),
                trace ? absl::StrCat("trace ", trace->name, ", ",
                                     std::min(t.max_requests, trace->size()), " requests")
                            .c_str()
                      : absl::StrCat("multiturn: ", w.sessions, " sessions × ", w.turns,
                                     " turns, system ", w.system_tokens, ", user ", w.user_tokens,
                                     ", output ", w.output_tokens)
                            .c_str());
    std::printf(
        "| policy | requests | TTFT p50 (s) | TTFT p95 (s) | output tok/s | token hit rate | "
        "prefill tokens run | preemptions | α | wall (s) "
        "|\n|---|---|---|---|---|---|---|---|---|---|\n");
  }
  std::vector<nlohmann::json> rows;
  for (engine::CachePolicy policy : policies) {
    config.scheduler.cache.policy = policy;
    auto engine = engine::Engine::Create(**model, nullptr, config);
    if (!engine.ok()) return Fail(engine.status());
    auto replay = trace ? ReplayTrace(**engine, *trace, t) : ReplayMultiTurn(**engine, w);
    if (!replay.ok()) return Fail(replay.status());
    (*engine)->Shutdown();
    nlohmann::json row = Summary({engine::CachePolicyName(policy), std::move(*replay)});
    if (json) {
      std::printf("%s\n", row.dump().c_str());
    } else {
      std::printf("| %s | %lld | %.3f | %.3f | %.1f | %.3f | %lld | %lld | %.1f | %.1f |\n",
                  row["policy"].get<std::string>().c_str(), row["requests"].get<long long>(),
                  row["ttft_p50_s"].get<double>(), row["ttft_p95_s"].get<double>(),
                  row["output_tokens_per_s"].get<double>(), row["token_hit_rate"].get<double>(),
                  row["prefill_tokens_run"].get<long long>(), row["preemptions"].get<long long>(),
                  row["alpha_final"].get<double>(), row["wall_seconds"].get<double>());
    }
    std::fflush(stdout);
    rows.push_back(std::move(row));
  }
  if (!json && rows.size() > 1 && rows[0]["policy"] == "none") {
    for (size_t i = 1; i < rows.size(); ++i) {
      const double p50 = rows[i]["ttft_p50_s"].get<double>();
      std::printf("\nTTFT p50: none ÷ %s = %.2f×", rows[i]["policy"].get<std::string>().c_str(),
                  p50 > 0 ? rows[0]["ttft_p50_s"].get<double>() / p50 : 0.0);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace tandem::cli
