// Small-M GEMM on one thread: our kernel per instruction set vs OpenBLAS, at the batched-decode
// row counts and the projection shapes of the ~100M presets (hidden 768). Weights larger than L2
// so that, as in a decode step, they come from memory. Used to set kOwnMaxRows in cpu_ops.cc.
//   Args: m, k (in), n (out), impl (0 = OpenBLAS, 1 = own AVX2, 2 = own AVX-512)
#include <benchmark/benchmark.h>

#include <vector>

#include "bench/kernels/bench_util.h"
#include "kernels/cpu/gemm.h"

namespace tandem::kernels {
namespace {

using bench::Random;

void BM_SmallMGemm(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int impl = static_cast<int>(state.range(3));
  const GemmIsa isa = impl == 2 ? GemmIsa::kAvx512 : GemmIsa::kAvx2;
  if (impl != 0 && !GemmIsaSupported(isa)) {
    state.SkipWithError("instruction set not supported");
    return;
  }
  // Several copies of the weights, cycled, so that each call reads them from beyond L2.
  const int copies = static_cast<int>(std::max<int64_t>(1, 16 * 1024 * 1024 / (4 * n * k)));
  std::vector<std::vector<float>> ws;
  for (int c = 0; c < copies; ++c) ws.push_back(Random(n * k, 2 + c));
  auto x = Random(m * k, 1), b = Random(n, 3);
  std::vector<float> y(m * n);
  int c = 0;
  for (auto _ : state) {
    const WeightMatrix w = WeightMatrix::F32(ws[c].data(), n, k);
    c = (c + 1) % copies;
    if (impl == 0) {
      BlasGemmNT(x.data(), k, m, w, b.data(), 0, n, y.data(), n);
    } else {
      OwnGemmNTWith(isa, x.data(), k, m, w, b.data(), 0, n, y.data(), n);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(impl == 0 ? "openblas" : impl == 1 ? "own-avx2" : "own-avx512");
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(4.0 * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  SetBlasThreads(1);
  // Mamba-2 in_proj (768 → 3352), out_proj (1536 → 768), MLP down (3072 → 768).
  for (auto [k, n] : std::vector<std::pair<int, int>>{{768, 3352}, {1536, 768}, {3072, 768}}) {
    for (int m : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96}) {
      for (int impl : {0, 1, 2}) b->Args({m, k, n, impl});
    }
  }
}

BENCHMARK(BM_SmallMGemm)->Apply(Shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tandem::kernels
