#include "server/cli/simulate_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "cache/alloc_simulator.h"
#include "cache/allocator_factory.h"
#include "cache/simulator.h"
#include "cache/trace.h"
#include "cache/workloads.h"
#include "nlohmann/json.hpp"

namespace tandem::cli {
namespace {

ModelDirLoader& Loader() {
  static ModelDirLoader* loader = new ModelDirLoader();
  return *loader;
}

// `--name value` or `--name=value`; booleans take no value. Returns false (with a message in
// *error) for unknown or repeated flags and missing values.
bool ParseFlags(int argc, char** argv, const std::set<std::string>& with_value,
                const std::set<std::string>& booleans, std::map<std::string, std::string>* out,
                std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      *error = "unexpected argument '" + arg + "'";
      return false;
    }
    arg = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (booleans.count(arg)) {
      if (value) {
        *error = "--" + arg + " takes no value";
        return false;
      }
      value = "1";
    } else if (with_value.count(arg)) {
      if (!value) {
        if (i + 1 >= argc) {
          *error = "--" + arg + " needs a value";
          return false;
        }
        value = argv[++i];
      }
    } else {
      *error = "unknown flag --" + arg;
      return false;
    }
    if (!out->emplace(arg, *value).second) {
      *error = "--" + arg + " given twice";
      return false;
    }
  }
  return true;
}

bool ParseNumber(const std::string& flag, const std::string& text, double* out,
                 std::string* error) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0) {
    *error = "--" + flag + ": '" + text + "' is not a non-negative number";
    return false;
  }
  *out = v;
  return true;
}

bool ParseSeed(const std::map<std::string, std::string>& f, uint64_t* seed, std::string* error) {
  auto it = f.find("seed");
  if (it == f.end()) return true;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0 || it->second[0] == '-') {
    *error = "--seed: '" + it->second + "' is not a non-negative integer";
    return false;
  }
  *seed = v;
  return true;
}

int Usage(const char* command, const std::string& error, const char* synopsis) {
  std::fprintf(stderr, "tandem %s: %s\nusage: tandem %s %s\n", command, error.c_str(), command,
               synopsis);
  return 2;
}

absl::StatusOr<cache::ModelSpec> ResolveSpec(const std::string& name) {
  auto builtin = cache::ModelSpec::Builtin(name);
  if (builtin.ok()) return builtin;
  struct stat st;
  if (stat(name.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    if (!Loader()) {
      return absl::UnimplementedError("--model-spec: reading a model directory ('" + name +
                                      "') is not available in this build; use a built-in name");
    }
    return Loader()(name);
  }
  return builtin.status();
}

void Print(const nlohmann::ordered_json& j, bool json) {
  if (json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::printf("%s: %s\n", it.key().c_str(), it.value().dump().c_str());
  }
}

constexpr char kSimulateSynopsis[] =
    "(--trace FILE | --workload NAME) [--seed S] --model-spec NAME|DIR --capacity-gb X "
    "--policy none|vllm-plus|sglang-plus|marconi [--alpha A] [--json] "
    "[--sessions N] [--sessions-per-second R]";
constexpr char kAllocSynopsis[] =
    "--workload NAME --allocator padded-unified|fixed-dual:R|avmp-static:R|avmp-dynamic "
    "--pool-gib G --model-spec NAME [--seed S] [--json]";

}  // namespace

void SetModelDirLoader(ModelDirLoader loader) { Loader() = std::move(loader); }

int RunSimulate(int argc, char** argv) {
  const char* cmd = "simulate";
  std::map<std::string, std::string> f;
  std::string error;
  if (!ParseFlags(argc, argv,
                  {"trace", "workload", "seed", "model-spec", "capacity-gb", "policy", "alpha",
                   "per-request-out", "bootstrap-multiplier", "sessions", "sessions-per-second"},
                  {"json"}, &f, &error)) {
    return Usage(cmd, error, kSimulateSynopsis);
  }
  if (f.count("trace") == f.count("workload")) {
    return Usage(cmd, "give exactly one of --trace and --workload", kSimulateSynopsis);
  }
  if (f.count("trace") && (f.count("sessions") || f.count("sessions-per-second"))) {
    return Usage(cmd, "--sessions and --sessions-per-second shape generated workloads only",
                 kSimulateSynopsis);
  }
  for (const char* required : {"model-spec", "capacity-gb", "policy"}) {
    if (!f.count(required)) {
      return Usage(cmd, std::string("missing --") + required, kSimulateSynopsis);
    }
  }
  uint64_t seed = 42;
  if (!ParseSeed(f, &seed, &error)) return Usage(cmd, error, kSimulateSynopsis);
  double capacity_gb = 0;
  if (!ParseNumber("capacity-gb", f["capacity-gb"], &capacity_gb, &error)) {
    return Usage(cmd, error, kSimulateSynopsis);
  }
  if (capacity_gb > 1e6) return Usage(cmd, "--capacity-gb must be at most 1e6", kSimulateSynopsis);
  auto policy = cache::ParseCachePolicy(f["policy"]);
  if (!policy.ok()) return Usage(cmd, std::string(policy.status().message()), kSimulateSynopsis);
  cache::SimulationConfig config;
  if (f.count("alpha")) {
    double alpha = 0;
    if (!ParseNumber("alpha", f["alpha"], &alpha, &error)) {
      return Usage(cmd, error, kSimulateSynopsis);
    }
    if (*policy != cache::CachePolicy::kMarconi) {
      return Usage(cmd, "--alpha applies only to --policy marconi", kSimulateSynopsis);
    }
    config.alpha = alpha;
  }
  if (f.count("bootstrap-multiplier")) {
    double k = 0;
    if (!ParseNumber("bootstrap-multiplier", f["bootstrap-multiplier"], &k, &error) || k <= 0) {
      return Usage(cmd, error.empty() ? "--bootstrap-multiplier must be positive" : error,
                   kSimulateSynopsis);
    }
    config.tuner.bootstrap_multiplier = k;
  }
  auto spec = ResolveSpec(f["model-spec"]);
  if (!spec.ok()) return Usage(cmd, std::string(spec.status().message()), kSimulateSynopsis);
  config.spec = *spec;
  config.policy = *policy;
  config.capacity_bytes = static_cast<size_t>(capacity_gb * 1e9);

  absl::StatusOr<cache::Trace> trace;
  if (f.count("trace")) {
    trace = cache::ReadTrace(f["trace"]);
    if (!trace.ok()) {
      std::fprintf(stderr, "tandem simulate: %s\n", std::string(trace.status().message()).c_str());
      return trace.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  } else {
    cache::WorkloadOptions options;
    options.seed = seed;
    // The generators' arrival process: how many sessions, and how fast they start (the paper
    // sweeps the rate; more sessions in flight means more contention for the cache).
    if (f.count("sessions")) {
      double sessions = 0;
      if (!ParseNumber("sessions", f["sessions"], &sessions, &error) || sessions < 1 ||
          sessions > 1e6 || sessions != std::floor(sessions)) {
        return Usage(cmd, error.empty() ? "--sessions must be an integer in [1, 1000000]" : error,
                     kSimulateSynopsis);
      }
      options.sessions = static_cast<size_t>(sessions);
    }
    if (f.count("sessions-per-second")) {
      double rate = 0;
      if (!ParseNumber("sessions-per-second", f["sessions-per-second"], &rate, &error) ||
          rate <= 0 || rate > 1e6) {
        return Usage(cmd,
                     error.empty() ? "--sessions-per-second must be in (0, 1000000]" : error,
                     kSimulateSynopsis);
      }
      options.sessions_per_second = rate;
    }
    trace = cache::GenerateSessionWorkload(f["workload"], options);
    if (!trace.ok()) return Usage(cmd, std::string(trace.status().message()), kSimulateSynopsis);
  }
  auto result = cache::Simulate(*trace, config);
  if (!result.ok()) {
    std::fprintf(stderr, "tandem simulate: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  if (f.count("per-request-out")) {
    // One line per request, in serving order: its prompt length and the share served from cache.
    std::FILE* out = std::fopen(f["per-request-out"].c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "tandem simulate: cannot write '%s'\n", f["per-request-out"].c_str());
      return 1;
    }
    for (size_t i = 0; i < result->per_request_input.size(); ++i) {
      std::fprintf(out, "{\"input_tokens\": %zu, \"hit_rate\": %.6f}\n",
                   result->per_request_input[i], result->per_request_hit_rate[i]);
    }
    std::fclose(out);
  }
  nlohmann::ordered_json j;
  j["token_hit_rate"] = result->token_hit_rate;
  j["flops_saved"] = result->flops_saved;
  j["requests"] = result->requests;
  j["input_tokens"] = result->input_tokens;
  j["hit_tokens"] = result->hit_tokens;
  j["ssm_checkpoints_admitted"] = result->ssm_checkpoints_admitted;
  j["evictions"] = result->evictions;
  j["alpha_final"] = result->alpha_final;
  j["hit_rate_p5"] = result->hit_rate_p5;
  j["hit_rate_p50"] = result->hit_rate_p50;
  j["hit_rate_p95"] = result->hit_rate_p95;
  j["wall_seconds"] = result->wall_seconds;
  Print(j, f.count("json") > 0);
  return 0;
}

int RunSimulateAlloc(int argc, char** argv) {
  const char* cmd = "simulate-alloc";
  std::map<std::string, std::string> f;
  std::string error;
  if (!ParseFlags(argc, argv, {"workload", "allocator", "pool-gib", "model-spec", "seed"}, {"json"},
                  &f, &error)) {
    return Usage(cmd, error, kAllocSynopsis);
  }
  for (const char* required : {"workload", "allocator", "pool-gib", "model-spec"}) {
    if (!f.count(required)) return Usage(cmd, std::string("missing --") + required, kAllocSynopsis);
  }
  uint64_t seed = 42;
  if (!ParseSeed(f, &seed, &error)) return Usage(cmd, error, kAllocSynopsis);
  double gib = 0;
  if (!ParseNumber("pool-gib", f["pool-gib"], &gib, &error)) {
    return Usage(cmd, error, kAllocSynopsis);
  }
  if (gib > 65536) return Usage(cmd, "--pool-gib must be at most 65536", kAllocSynopsis);
  auto spec = ResolveSpec(f["model-spec"]);
  if (!spec.ok()) return Usage(cmd, std::string(spec.status().message()), kAllocSynopsis);
  auto requests = cache::GenerateAllocWorkload(f["workload"], seed);
  if (!requests.ok()) return Usage(cmd, std::string(requests.status().message()), kAllocSynopsis);
  cache::AllocatorOptions options;
  options.budget_bytes = static_cast<size_t>(gib * double(size_t{1} << 30));
  auto allocator = cache::CreateAllocator(f["allocator"], *spec, options);
  if (!allocator.ok()) {
    return Usage(cmd, std::string(allocator.status().message()), kAllocSynopsis);
  }
  auto result = cache::SimulateAllocator(*requests, *allocator);
  if (!result.ok()) {
    std::fprintf(stderr, "tandem simulate-alloc: %s\n",
                 std::string(result.status().message()).c_str());
    return 1;
  }
  nlohmann::ordered_json j;
  j["oom_events"] = result->oom_events;
  j["goodput"] = result->goodput;
  j["peak_reserved_bytes"] = result->peak_reserved_bytes;
  j["migrations"] = result->migrations;
  j["bytes_migrated"] = result->bytes_migrated;
  if (!f.count("json")) {  // --json carries exactly the five keys above
    j["completed"] = result->completed;
    j["dropped"] = result->dropped;
    j["preemptions"] = result->preemptions;
    j["ticks"] = result->ticks;
    j["budget_bytes"] = result->budget_bytes;
  }
  Print(j, f.count("json") > 0);
  return 0;
}

}  // namespace tandem::cli
