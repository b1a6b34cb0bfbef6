// Hydragen decode attention vs per-sequence paged attention (docs/ARCHITECTURE.md, "Hydragen"),
// CpuOps: B sequences share a prefix of P tokens (the same KV pages, as the engine shares a cached
// prefix) and each has a private suffix of 1–32 tokens, the last being its decode token.
// Per-sequence attention is Ops::Attention for each sequence (what AttentionLayer runs without
// sharing); Hydragen is one SharedPrefixAttention over all B decode rows, B PartialAttention calls
// for the suffixes and their MergeAttention; exact Hydragen (the batch-invariant default) is one
// AdvanceSharedAttention over the prefix and one FinishAttention for the suffixes. All three run
// one after the other inside each iteration, so the `speedup` (merged) and `exact_speedup`
// counters are ratios measured in one run on the same (shared, noisy) cores; `exact_differs`
// counts output floats whose bits differ from per-sequence attention's (0). Head
// configuration of a 7–8B GQA model: 32 query heads, 8 kv heads, head_dim 128, pages of 16 tokens.
//
// BM_HydragenVsPaged/B/P: the grid of docs/BENCHMARKS.md; BM_HydragenCrossover/B/P: small batches
// and prefixes, where the crossover lies; BM_SharedPrefixAttention/impl/B/P: the prefix op alone,
// with each implementation (0 = OpenBLAS, the portable fallback; 1 = the AVX-512 kernel).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/kernels/bench_util.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/hydragen_attention.h"

namespace tandem::kernels {
namespace {

constexpr int32_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kPageTokens = 16;
constexpr int64_t kWidth = int64_t{kHeads} * kHeadDim;

CpuOps& Cpu() {
  static CpuOps cpu(bench::ThreadsFromEnv());
  return cpu;
}

struct Batch {
  std::vector<std::unique_ptr<float[]>> storage;
  std::vector<std::vector<float*>> tables;
  std::vector<int64_t> pos;
  std::vector<float> q;

  Batch(int64_t batch, int64_t prefix) {
    const int64_t page_floats = 2 * int64_t{kKvHeads} * kPageTokens * kHeadDim;
    uint32_t seed = 1;
    auto new_page = [&] {
      std::vector<float> v = bench::Random(page_floats, seed++);
      storage.push_back(std::make_unique<float[]>(page_floats));
      std::copy(v.begin(), v.end(), storage.back().get());
      return storage.back().get();
    };
    std::vector<float*> shared;
    for (int64_t p = 0; p < prefix / kPageTokens; ++p) shared.push_back(new_page());
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t position = prefix + (i * 7) % 32;  // suffixes of 1 … 32 tokens
      std::vector<float*> table = shared;
      while (static_cast<int64_t>(table.size()) * kPageTokens <= position) {
        table.push_back(new_page());
      }
      tables.push_back(std::move(table));
      pos.push_back(position);
    }
    q = bench::Random(batch * kWidth, 99);
  }

  PagedKv View(int64_t i) const {
    PagedKv kv;
    kv.pages = tables[i].data();
    kv.page_tokens = kPageTokens;
    kv.num_kv_heads = kKvHeads;
    kv.head_dim = kHeadDim;
    return kv;
  }
};

const float kScale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));

void PerSequence(Ops& ops, const Batch& b, float* out, Workspace& ws) {
  for (size_t i = 0; i < b.pos.size(); ++i) {
    AttentionArgs a;
    a.tokens = 1;
    a.start_pos = b.pos[i];
    a.heads = kHeads;
    a.q = b.q.data() + i * kWidth;
    a.ld_q = kWidth;
    a.kv = b.View(i);
    a.scale = kScale;
    a.out = out + i * kWidth;
    a.ld_out = kWidth;
    ws.Reset();
    ops.Attention(a, ws);
  }
}

// Every decode row of the batch over the shared keys [0, prefix).
SharedPrefixAttentionArgs PrefixArgs(const Batch& b, int64_t prefix) {
  SharedPrefixAttentionArgs s;
  s.rows = static_cast<int64_t>(b.pos.size());
  s.heads = kHeads;
  s.q = b.q.data();
  s.ld_q = kWidth;
  s.kv = b.View(0);
  s.key_end = prefix;
  s.scale = kScale;
  return s;
}

void Hydragen(Ops& ops, const Batch& b, int64_t prefix, float* out, Workspace& ws) {
  const int64_t batch = b.pos.size();
  ws.Reset();
  float* prefix_out = ws.Floats(batch * kWidth);
  float* prefix_lse = ws.Floats(batch * kHeads);
  float* suffix_out = ws.Floats(kWidth);
  float* suffix_lse = ws.Floats(kHeads);
  SharedPrefixAttentionArgs s = PrefixArgs(b, prefix);
  s.out = prefix_out;
  s.ld_out = kWidth;
  s.lse = prefix_lse;
  s.ld_lse = kHeads;
  ops.SharedPrefixAttention(s, ws);
  for (int64_t i = 0; i < batch; ++i) {
    PartialAttentionArgs a;
    a.rows = 1;
    a.heads = kHeads;
    a.q = b.q.data() + i * kWidth;
    a.ld_q = kWidth;
    a.kv = b.View(i);
    a.key_begin = prefix;
    a.key_end = b.pos[i] + 1;
    a.scale = kScale;
    a.out = suffix_out;
    a.ld_out = kWidth;
    a.lse = suffix_lse;
    a.ld_lse = kHeads;
    ops.PartialAttention(a, ws);
    const AttentionPart parts[] = {
        {prefix_out + i * kWidth, kWidth, prefix_lse + i * kHeads, kHeads},
        {suffix_out, kWidth, suffix_lse, kHeads}};
    ops.MergeAttention(parts, 1, kHeads, kHeadDim, out + i * kWidth, kWidth, nullptr, 0);
  }
}

// Exact Hydragen (Ops::ResumesAttentionExactly): the rows' states advanced over the prefix
// together, then each resumed over its own suffix; the bits of PerSequence.
void ExactHydragen(Ops& ops, const Batch& b, int64_t prefix, float* out, Workspace& ws) {
  const int64_t batch = b.pos.size();
  ws.Reset();
  AttentionState st;
  st.acc = ws.Floats(batch * kWidth);
  st.ld_acc = kWidth;
  st.max = ws.Floats(batch * kHeads);
  st.sum = ws.Floats(batch * kHeads);
  st.ld = kHeads;
  ops.AdvanceSharedAttention(PrefixArgs(b, prefix), st, /*start=*/true, ws);
  auto** tables = ws.Array<float* const*>(batch);
  int64_t* begins = ws.Array<int64_t>(batch);
  int64_t* ends = ws.Array<int64_t>(batch);
  for (int64_t i = 0; i < batch; ++i) {
    tables[i] = b.tables[i].data();
    begins[i] = prefix;
    ends[i] = b.pos[i] + 1;
  }
  PartialAttentionArgs a;
  a.rows = batch;
  a.heads = kHeads;
  a.q = b.q.data();
  a.ld_q = kWidth;
  a.kv = b.View(0);
  a.page_tables = tables;
  a.key_begins = begins;
  a.key_ends = ends;
  a.scale = kScale;
  a.out = out;
  a.ld_out = kWidth;
  ops.FinishAttention(a, st, ws);
}

void Compare(benchmark::State& state) {
  const int64_t batch = state.range(0), prefix = state.range(1);
  const Batch b(batch, prefix);
  std::vector<float> paged_out(batch * kWidth), hydragen_out(batch * kWidth),
      exact_out(batch * kWidth);
  Workspace ws;
  double paged_s = 0, hydragen_s = 0, exact_s = 0;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    PerSequence(Cpu(), b, paged_out.data(), ws);
    const auto t1 = Clock::now();
    Hydragen(Cpu(), b, prefix, hydragen_out.data(), ws);
    const auto t2 = Clock::now();
    ExactHydragen(Cpu(), b, prefix, exact_out.data(), ws);
    const auto t3 = Clock::now();
    paged_s += std::chrono::duration<double>(t1 - t0).count();
    hydragen_s += std::chrono::duration<double>(t2 - t1).count();
    exact_s += std::chrono::duration<double>(t3 - t2).count();
    state.SetIterationTime(std::chrono::duration<double>(t2 - t1).count());
  }
  float diff = 0;
  int64_t exact_differs = 0;
  for (size_t i = 0; i < paged_out.size(); ++i) {
    diff = std::max(diff, std::fabs(paged_out[i] - hydragen_out[i]));
    exact_differs += std::memcmp(&paged_out[i], &exact_out[i], sizeof(float)) != 0;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["paged_ms"] = 1e3 * paged_s / n;
  state.counters["hydragen_ms"] = 1e3 * hydragen_s / n;
  state.counters["speedup"] = paged_s / hydragen_s;
  state.counters["max_abs_diff"] = diff;
  state.counters["exact_ms"] = 1e3 * exact_s / n;
  state.counters["exact_speedup"] = paged_s / exact_s;
  state.counters["exact_differs"] = static_cast<double>(exact_differs);  // floats; must be 0
}

void BM_HydragenVsPaged(benchmark::State& state) { Compare(state); }
BENCHMARK(BM_HydragenVsPaged)
    ->ArgsProduct({{8, 16, 32, 64}, {1024, 2048, 4096, 8192}})
    ->ArgNames({"batch", "prefix"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_HydragenCrossover(benchmark::State& state) { Compare(state); }
BENCHMARK(BM_HydragenCrossover)
    ->ArgsProduct({{2, 4, 8}, {16, 64, 256, 1024}})
    ->ArgNames({"batch", "prefix"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The prefix op alone, with its GEMM rate: 4 flops per (row, head, key, dim) for Q·Kᵀ and P·V.
void BM_SharedPrefixAttention(benchmark::State& state) {
  const auto impl = state.range(0) == 0 ? SharedPrefixImpl::kBlas : SharedPrefixImpl::kAvx512;
  if (!SharedPrefixImplSupported(impl)) {
    state.SkipWithError("this CPU has no AVX-512");
    return;
  }
  Cpu();  // constructing CpuOps limits OpenBLAS to one thread per call, as CpuOps runs it
  static ThreadPool pool(bench::ThreadsFromEnv());
  const int64_t batch = state.range(1), prefix = state.range(2);
  const Batch b(batch, prefix);
  std::vector<float> out(batch * kWidth), lse(batch * kHeads);
  Workspace ws;
  for (auto _ : state) {
    ws.Reset();
    SharedPrefixAttentionArgs s = PrefixArgs(b, prefix);
    s.out = out.data();
    s.ld_out = kWidth;
    s.lse = lse.data();
    s.ld_lse = kHeads;
    SharedPrefixAttentionWith(impl, pool, s, ws);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * batch * kHeads * prefix * kHeadDim * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SharedPrefixAttention)
    ->ArgsProduct({{0, 1}, {8, 64}, {4096}})
    ->ArgNames({"impl", "batch", "prefix"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::kernels
