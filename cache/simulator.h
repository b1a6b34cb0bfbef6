// Trace-driven prefix-cache simulation (`tandem simulate`): requests are served in arrival
// order through the same PrefixCache the server runs, with one byte capacity covering KV pages
// and SSM checkpoints (Marconi's model), and the cache's hit statistics are reported.
//
// Policies:
//   none        — no prefix cache;
//   vllm-plus   — a state every 32 tokens (block grid), LRU over leaves, path refresh;
//   sglang-plus — Marconi's admission (branch point + last token), LRU over leaves;
//   marconi     — Marconi's admission and FLOP-aware eviction; α tuned online by AlphaTuner
//                 (cache/alpha_tuner.h) unless fixed.
#ifndef TANDEM_CACHE_SIMULATOR_H_
#define TANDEM_CACHE_SIMULATOR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/alpha_tuner.h"
#include "cache/model_spec.h"
#include "cache/trace.h"

namespace tandem::cache {

enum class CachePolicy : uint8_t { kNone, kVllmPlus, kSglangPlus, kMarconi };
absl::StatusOr<CachePolicy> ParseCachePolicy(const std::string& name);
std::string CachePolicyName(CachePolicy policy);

struct SimulationConfig {
  ModelSpec spec;
  size_t capacity_bytes = 0;
  CachePolicy policy = CachePolicy::kMarconi;
  std::optional<double> alpha;  // fixes α (marconi only); otherwise it is tuned
  size_t page_tokens = 16;
  size_t vllm_block_tokens = 32;
  TunerConfig tuner;  // synchronous is forced on (deterministic results)
};

struct SimulationResult {
  double token_hit_rate = 0;
  double flops_saved = 0;
  uint64_t requests = 0;
  uint64_t input_tokens = 0;
  uint64_t hit_tokens = 0;
  uint64_t ssm_checkpoints_admitted = 0;
  uint64_t evictions = 0;
  double alpha_final = 0;
  double hit_rate_p5 = 0, hit_rate_p50 = 0, hit_rate_p95 = 0;
  double wall_seconds = 0;
  std::vector<double> per_request_hit_rate;  // in serving order
  std::vector<size_t> per_request_input;
  std::vector<AlphaTuning> tunings;
};

// INVALID_ARGUMENT for a bad spec or configuration.
absl::StatusOr<SimulationResult> Simulate(const Trace& trace, const SimulationConfig& config);

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_SIMULATOR_H_
