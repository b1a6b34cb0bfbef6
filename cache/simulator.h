// Trace-driven prefix-cache simulation (`tandem simulate`): requests are served in arrival
// order through the same PrefixCache the server runs, with one byte capacity covering KV pages
// and SSM checkpoints (Marconi's model), and the cache's hit statistics are reported.
//
// Policies:
//   none        — no prefix cache;
//   vllm-plus   — a state every 32 tokens (block grid), LRU over leaves, path refresh;
//   sglang-plus — Marconi's admission (branch point + last token), LRU over leaves;
//   marconi     — Marconi's admission and FLOP-aware eviction; α tuned online (AlphaTuner
//                 rules: α = 0 until the first eviction, then a bootstrap window of k× the
//                 requests seen so far is replayed from a snapshot for each α of a grid and the
//                 one saving the most FLOPs is adopted) unless fixed.
#ifndef TANDEM_CACHE_SIMULATOR_H_
#define TANDEM_CACHE_SIMULATOR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/model_spec.h"
#include "cache/trace.h"

namespace tandem::cache {

enum class CachePolicy : uint8_t { kNone, kVllmPlus, kSglangPlus, kMarconi };
absl::StatusOr<CachePolicy> ParseCachePolicy(const std::string& name);
std::string CachePolicyName(CachePolicy policy);

struct TunerConfig {
  double bootstrap_multiplier = 5;
  std::vector<double> grid = {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
                              1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0};
  int threads = 2;
};

struct SimulationConfig {
  ModelSpec spec;
  size_t capacity_bytes = 0;
  CachePolicy policy = CachePolicy::kMarconi;
  std::optional<double> alpha;  // fixes α (marconi only); otherwise it is tuned
  size_t page_tokens = 16;
  size_t vllm_block_tokens = 32;
  TunerConfig tuner;
};

struct AlphaTuning {
  size_t at_request = 0;  // requests served when the tuning finished
  size_t window = 0;      // requests replayed
  double alpha = 0;
  double flops_saved = 0;  // by the chosen α over the window
  double wall_seconds = 0;  // the grid replay
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
