#include "cache/simulator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/counting_allocator.h"
#include "cache/prefix_cache.h"
#include "cache/request_runner.h"

namespace tandem::cache {
namespace {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

PrefixCacheConfig CacheConfig(const SimulationConfig& c) {
  PrefixCacheConfig pc;
  pc.page_tokens = c.page_tokens;
  pc.capacity_bytes = c.capacity_bytes;
  pc.block_tokens = c.vllm_block_tokens;
  switch (c.policy) {
    case CachePolicy::kVllmPlus:
      pc.admission = AdmissionPolicy::kEveryBlock;
      pc.eviction = EvictionPolicy::kLruLeaves;
      break;
    case CachePolicy::kSglangPlus:
      pc.eviction = EvictionPolicy::kLruLeaves;
      break;
    default:
      pc.eviction = EvictionPolicy::kFlopAware;
      pc.alpha = c.alpha.value_or(0.0);
      break;
  }
  return pc;
}

// Replays requests [first, last) of `order` on a copy of `snapshot` for every α of the grid;
// returns the FLOPs each α saved.
std::vector<double> ReplayGrid(const PrefixCache& snapshot, const Trace& trace,
                               const std::vector<size_t>& order, size_t first, size_t last,
                               const SimulationConfig& config) {
  const std::vector<double>& grid = config.tuner.grid;
  std::vector<double> saved(grid.size(), 0);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    std::vector<TokenId> in, out;
    for (size_t g = next++; g < grid.size(); g = next++) {
      CountingAllocator alloc(snapshot.config().page_tokens * config.spec.kv_bytes_per_token(),
                              config.spec.ssm_state_bytes());
      std::unique_ptr<PrefixCache> cache = snapshot.Clone(&alloc);
      cache->set_alpha(grid[g]);
      const double before = cache->stats().flops_saved;
      for (size_t i = first; i < last; ++i) {
        trace.Tokens(order[i], &in, &out);
        (void)RunRequest(*cache, alloc, in, out);
      }
      saved[g] = cache->stats().flops_saved - before;
    }
  };
  const int threads = std::max(1, config.tuner.threads);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return saved;
}

}  // namespace

absl::StatusOr<CachePolicy> ParseCachePolicy(const std::string& name) {
  if (name == "none") return CachePolicy::kNone;
  if (name == "vllm-plus") return CachePolicy::kVllmPlus;
  if (name == "sglang-plus") return CachePolicy::kSglangPlus;
  if (name == "marconi") return CachePolicy::kMarconi;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown policy '", name, "' (expected none, vllm-plus, sglang-plus or marconi)"));
}

std::string CachePolicyName(CachePolicy policy) {
  switch (policy) {
    case CachePolicy::kNone: return "none";
    case CachePolicy::kVllmPlus: return "vllm-plus";
    case CachePolicy::kSglangPlus: return "sglang-plus";
    case CachePolicy::kMarconi: return "marconi";
  }
  return "?";
}

absl::StatusOr<SimulationResult> Simulate(const Trace& trace, const SimulationConfig& config) {
  if (absl::Status s = config.spec.Validate(); !s.ok()) return s;
  if (config.page_tokens == 0 || config.vllm_block_tokens == 0) {
    return absl::InvalidArgumentError("page_tokens and vllm_block_tokens must be positive");
  }
  if (config.alpha && !(*config.alpha >= 0 && std::isfinite(*config.alpha))) {
    return absl::InvalidArgumentError("alpha must be a finite number >= 0");
  }
  if (config.tuner.grid.empty() || !(config.tuner.bootstrap_multiplier > 0)) {
    return absl::InvalidArgumentError("the α grid must be non-empty and the multiplier positive");
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<size_t> order(trace.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return trace.requests[a].arrival_s < trace.requests[b].arrival_s;
  });

  SimulationResult result;
  CountingAllocator alloc(config.page_tokens * config.spec.kv_bytes_per_token(),
                          config.spec.ssm_state_bytes());
  std::unique_ptr<PrefixCache> cache;
  if (config.policy != CachePolicy::kNone) {
    cache = std::make_unique<PrefixCache>(CacheConfig(config), config.spec, &alloc);
  }
  const bool tune = config.policy == CachePolicy::kMarconi && !config.alpha.has_value();
  bool evicted = false;
  if (cache) cache->set_first_eviction_callback([&] { evicted = true; });
  // Tuning state: the snapshot taken when the first eviction happened and the window after it.
  CountingAllocator snapshot_alloc(config.page_tokens * config.spec.kv_bytes_per_token(),
                                   config.spec.ssm_state_bytes());
  std::unique_ptr<PrefixCache> snapshot;
  size_t window_first = 0, window_last = 0;
  bool tuned = false;

  std::vector<TokenId> in, out;
  for (size_t i = 0; i < order.size(); ++i) {
    trace.Tokens(order[i], &in, &out);
    size_t usable = 0;
    if (cache) {
      auto r = RunRequest(*cache, alloc, in, out);
      if (r.ok()) usable = r->usable_tokens;
      if (tune && evicted && !snapshot && !tuned) {
        const size_t seen = std::max<size_t>(1, i);  // requests served before the first eviction
        snapshot = cache->Clone(&snapshot_alloc);
        window_first = i + 1;
        window_last = std::min(order.size(),
                               window_first + static_cast<size_t>(std::ceil(
                                                  config.tuner.bootstrap_multiplier * seen)));
      }
      if (snapshot && i + 1 == window_last) {
        const auto tune_start = std::chrono::steady_clock::now();
        const std::vector<double> saved =
            ReplayGrid(*snapshot, trace, order, window_first, window_last, config);
        const double tune_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - tune_start).count();
        const size_t best = std::max_element(saved.begin(), saved.end()) - saved.begin();
        cache->set_alpha(config.tuner.grid[best]);
        result.tunings.push_back({i + 1, window_last - window_first, config.tuner.grid[best],
                                  saved[best], tune_seconds});
        snapshot.reset();
        tuned = true;
      }
    }
    result.per_request_input.push_back(in.size());
    result.per_request_hit_rate.push_back(in.empty() ? 0.0 : double(usable) / double(in.size()));
  }

  result.requests = order.size();
  for (size_t n : result.per_request_input) result.input_tokens += n;
  if (cache) {
    const PrefixCacheStats s = cache->stats();
    result.hit_tokens = s.hit_tokens;
    result.flops_saved = s.flops_saved;
    result.ssm_checkpoints_admitted = s.checkpoints_admitted;
    result.evictions = s.evictions;
    result.alpha_final = cache->alpha();
  }
  result.token_hit_rate =
      result.input_tokens == 0 ? 0 : double(result.hit_tokens) / double(result.input_tokens);
  result.hit_rate_p5 = Percentile(result.per_request_hit_rate, 0.05);
  result.hit_rate_p50 = Percentile(result.per_request_hit_rate, 0.50);
  result.hit_rate_p95 = Percentile(result.per_request_hit_rate, 0.95);
  cache.reset();
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tandem::cache
