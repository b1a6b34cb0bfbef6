// CpuOps::Linear with weights in each format (kernels/weight_matrix.h) at decode and prefill row
// counts, with the weights cycled through enough copies that every call reads them from memory,
// as a decode step does. The ratios to f32 at one run are the figures of docs/BENCHMARKS.md,
// "Weight formats".
//   Args: m, k (in), n (out), format (0 = f32, 1 = bf16, 2 = f16, 3 = int8)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/kernels/bench_util.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/weight_matrix.h"

namespace tandem::kernels {
namespace {

using bench::Random;

constexpr WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16,
                                     WeightFormat::kI8};

void BM_LinearFormat(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const WeightFormat format = kFormats[state.range(3)];
  static CpuOps cpu(bench::ThreadsFromEnv());
  // At least 64 MiB of f32 weights in total: far beyond the last-level cache.
  const int copies = static_cast<int>(std::max<int64_t>(2, 64 * 1024 * 1024 / (4 * n * k)));
  std::vector<std::vector<uint8_t>> storage(copies);
  std::vector<std::vector<float>> scales(copies);
  std::vector<WeightMatrix> weights;
  for (int c = 0; c < copies; ++c) {
    const std::vector<float> w = Random(n * k, 2 + c);
    storage[c].resize(static_cast<size_t>(n * k) * WeightElementBytes(format));
    scales[c].resize(n);
    ConvertWeights(w.data(), n, k, format, storage[c].data(), scales[c].data());
    weights.push_back({format, storage[c].data(),
                       format == WeightFormat::kI8 ? scales[c].data() : nullptr, n, k});
  }
  auto x = Random(m * k, 1), b = Random(n, 3);
  std::vector<float> y(m * n);
  int c = 0;
  for (auto _ : state) {
    cpu.Linear(x.data(), k, m, weights[c], b.data(), y.data(), n);
    c = (c + 1) % copies;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(WeightFormatName(format)));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] = benchmark::Counter(
      static_cast<double>(weights[0].bytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  // Mamba-1 in_proj (768 → 2·1536), MLP down (2048 → 768), a 4096-wide projection, lm_head.
  const std::vector<std::pair<int, int>> kn = {{768, 3072}, {2048, 768}, {4096, 4096},
                                               {768, 32000}};
  for (int m : {1, 8, 512}) {
    for (auto [k, n] : kn) {
      if (m == 512 && n == 32000) continue;
      for (int format = 0; format < 4; ++format) b->Args({m, k, n, format});
    }
  }
}

BENCHMARK(BM_LinearFormat)->Apply(Shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tandem::kernels
