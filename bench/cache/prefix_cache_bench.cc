// Prefix-cache speed: lookup+insert cost per request as prompts grow (should be linear in the
// matched tokens), and eviction cost as the tree grows (should stay flat: no O(nodes) scans).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "cache/baseline_allocators.h"
#include "cache/model_spec.h"
#include "cache/prefix_cache.h"
#include "cache/request_runner.h"
#include "cache/simulator.h"
#include "cache/trace.h"
#include "cache/workloads.h"

namespace tandem::cache {
namespace {

// 1 TiB of accounting-only memory: the tree's own work dominates, not the allocator's.
std::unique_ptr<FixedDualAllocator> BigAllocator(const ModelSpec& spec) {
  return *FixedDualAllocator::Create({.kv_page_bytes = spec.kv_bytes_per_token() * 16,
                                      .ssm_block_bytes = spec.ssm_state_bytes(),
                                      .budget_bytes = size_t{1} << 40,
                                      .mamba_full_memory_ratio = 1.0,
                                      .backing = BackingKind::kAccounting});
}

// A multi-turn session: each turn's prompt is the previous turn's tokens plus `turn` new ones,
// so every lookup matches the whole history.
void BM_MultiTurnLookupInsert(benchmark::State& state) {
  const ModelSpec spec = *ModelSpec::Builtin("marconi-7b");
  const size_t turn = state.range(0);
  auto alloc = BigAllocator(spec);
  PrefixCache cache({}, spec, alloc.get());
  std::mt19937 rng(1);
  std::vector<TokenId> history;
  std::vector<TokenId> output(32);
  size_t matched = 0;
  for (auto _ : state) {
    if (history.size() > 32768) {
      state.PauseTiming();
      history.clear();
      cache.EvictToBytes(0);
      state.ResumeTiming();
    }
    for (size_t i = 0; i < turn; ++i) history.push_back(static_cast<TokenId>(rng()));
    for (auto& t : output) t = static_cast<TokenId>(rng());
    auto r = RunRequest(cache, *alloc, history, output);
    matched += r->usable_tokens;
    history.insert(history.end(), output.begin(), output.end());
  }
  state.counters["matched_tokens_per_s"] =
      benchmark::Counter(double(matched), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MultiTurnLookupInsert)->Arg(128)->Arg(1024);

// Lookup alone over a long cached prefix: cost per matched token.
void BM_Lookup(benchmark::State& state) {
  const ModelSpec spec = *ModelSpec::Builtin("marconi-7b");
  auto alloc = BigAllocator(spec);
  PrefixCache cache({}, spec, alloc.get());
  std::vector<TokenId> prompt(state.range(0));
  std::mt19937 rng(2);
  for (auto& t : prompt) t = static_cast<TokenId>(rng());
  (void)RunRequest(cache, *alloc, prompt, {});
  for (auto _ : state) {
    PrefixCache::Hit h = cache.Lookup(prompt);
    benchmark::DoNotOptimize(h.usable_tokens);
    cache.Abort(h.lease);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Lookup)->Arg(1024)->Arg(16384);

// One FLOP-aware eviction (α = 1) in a tree of N leaves of random lengths: the threshold walk
// should keep this near-constant as N grows.
void BM_EvictOne(benchmark::State& state) {
  const ModelSpec spec = *ModelSpec::Builtin("marconi-7b");
  const size_t n = state.range(0);
  auto alloc = BigAllocator(spec);
  PrefixCacheConfig config;
  config.alpha = 1.0;
  PrefixCache cache(config, spec, alloc.get());
  std::mt19937 rng(3);
  auto add = [&] {
    std::vector<TokenId> p(16 + rng() % 256);
    for (auto& t : p) t = static_cast<TokenId>(rng());
    (void)RunRequest(cache, *alloc, p, {});
  };
  for (size_t i = 0; i < n; ++i) add();
  for (auto _ : state) {
    cache.Evict(Pool::kSsmBlock, 1);
    state.PauseTiming();
    add();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_EvictOne)->Arg(1000)->Arg(10000)->Arg(100000);

// Whole-trace replay: the generated swebench workload (100 sessions, ~3.4k requests, ~50M
// input tokens) under Marconi with online α tuning; counters report the grid search.
void BM_SimulateSwebench(benchmark::State& state) {
  const Trace trace = *GenerateSessionWorkload("swebench", {});
  SimulationConfig config;
  config.spec = *ModelSpec::Builtin("marconi-7b");
  config.capacity_bytes = size_t{60} * 1000 * 1000 * 1000;
  config.policy = CachePolicy::kMarconi;
  double tuning = 0, window = 0;
  for (auto _ : state) {
    SimulationResult r = *Simulate(trace, config);
    if (!r.tunings.empty()) {
      tuning = r.tunings[0].wall_seconds;
      window = double(r.tunings[0].window);
    }
  }
  state.counters["requests"] = double(trace.size());
  state.counters["alpha_grid_seconds"] = tuning;
  state.counters["alpha_window_requests"] = window;
}
BENCHMARK(BM_SimulateSwebench)->Unit(benchmark::kSecond)->Iterations(1);

// Replaying the Mooncake trace (3,993 requests, 61M input tokens) if it is present.
void BM_SimulateMooncake(benchmark::State& state) {
  auto trace = ReadTrace("/work/shared/traces/mooncake_synthetic_trace.jsonl");
  if (!trace.ok()) {
    state.SkipWithError("no Mooncake trace");
    return;
  }
  SimulationConfig config;
  config.spec = *ModelSpec::Builtin("marconi-7b");
  config.capacity_bytes = size_t{50} * 1000 * 1000 * 1000;
  config.policy = CachePolicy::kMarconi;
  for (auto _ : state) benchmark::DoNotOptimize(*Simulate(*trace, config));
  state.counters["requests"] = double(trace->size());
}
BENCHMARK(BM_SimulateMooncake)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace tandem::cache
