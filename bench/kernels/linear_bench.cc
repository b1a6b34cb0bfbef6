// Linear: OpenBLAS vs our own kernel, at the projection shapes of a ~100M-parameter hybrid model
// (hidden 768, din 1536), for decode (m = 1, 4) and prefill (m = 512) rows.
//   Args: m, k (in), n (out), impl (0 = OpenBLAS, 1 = own, 2 = auto)
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bench/kernels/bench_util.h"
#include "kernels/cpu/cpu_ops.h"

namespace tandem::kernels {
namespace {

using bench::Random;

void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const GemmImpl impl = state.range(3) == 0   ? GemmImpl::kBlas
                        : state.range(3) == 1 ? GemmImpl::kOwn
                                              : GemmImpl::kAuto;
  static CpuOps cpu(bench::ThreadsFromEnv());
  cpu.set_gemm_impl(impl);
  auto x = Random(m * k, 1), w = Random(n * k, 2), b = Random(n, 3);
  std::vector<float> y(m * n);
  for (auto _ : state) {
    cpu.Linear(x.data(), k, m, WeightMatrix::F32(w.data(), n, k), b.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(state.range(3) == 0 ? "openblas" : state.range(3) == 1 ? "own" : "auto");
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(4.0 * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  // Mamba-1 in_proj (768 → 2·1536), out_proj (1536 → 768), Mamba-2 in_proj (768 → 3352),
  // MLP gate_up (768 → 2·2048) and down (2048 → 768).
  const std::vector<std::pair<int, int>> kn = {
      {768, 3072}, {1536, 768}, {768, 3352}, {768, 4096}, {2048, 768}};
  for (int m : {1, 4, 512}) {
    for (auto [k, n] : kn) {
      for (int impl : {0, 1}) b->Args({m, k, n, impl});
    }
  }
  b->Args({1, 768, 32000, 0})->Args({1, 768, 32000, 1});  // lm_head
}

BENCHMARK(BM_Linear)->Apply(Shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tandem::kernels
