#include "cache/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>

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
  // PrefixCache reads 0 as "no limit"; a 0-byte simulation caches nothing.
  pc.capacity_bytes = std::max<size_t>(1, c.capacity_bytes);
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
    case CachePolicy::kNone:
      return "none";
    case CachePolicy::kVllmPlus:
      return "vllm-plus";
    case CachePolicy::kSglangPlus:
      return "sglang-plus";
    case CachePolicy::kMarconi:
      return "marconi";
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
  const bool tune = cache && config.policy == CachePolicy::kMarconi && !config.alpha.has_value();
  std::unique_ptr<AlphaTuner> tuner;
  if (tune) {
    TunerConfig tc = config.tuner;
    tc.synchronous = true;
    // Offline the log is bounded by the trace; the online bounds on the window would only make
    // the replays depart from the paper's k × rule.
    tc.max_window_requests = SIZE_MAX;
    tc.max_window_tokens = SIZE_MAX;
    tc.max_events = SIZE_MAX;
    tuner = std::make_unique<AlphaTuner>(tc, cache.get());
  }

  std::vector<TokenId> in, out;
  for (size_t i = 0; i < order.size(); ++i) {
    trace.Tokens(order[i], &in, &out);
    size_t usable = 0;
    if (cache) {
      auto r = RunRequest(*cache, alloc, in, out);
      if (r.ok()) {
        usable = r->usable_tokens;
      } else if (!absl::IsResourceExhausted(r.status())) {
        // The counting allocator never runs dry, so only a broken tree refuses a request.
        return absl::InternalError(absl::StrCat("request ", order[i], ": ", r.status().message()));
      }
      if (tuner) tuner->OnRequest(in, out, usable);
    }
    result.per_request_input.push_back(in.size());
    result.per_request_hit_rate.push_back(in.empty() ? 0.0 : double(usable) / double(in.size()));
  }
  if (tuner) {
    result.tunings.assign(tuner->events().begin(), tuner->events().end());
    tuner.reset();
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
