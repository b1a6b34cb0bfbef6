// A step's sampling read-back on the host backends: 32 rows of a 32K vocabulary, each drawn with
// temperature 0.7 and top-p 0.9 from Gaussian logits, by the reference backend (one row after
// another, the default Ops::ReadBackSampled) and by CpuOps over 1 and 2 threads of its pool.
// Counter: rows/s.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/sampling_row.h"

namespace tandem::kernels {
namespace {

void BM_ReadBackSampled(benchmark::State& state) {
  constexpr int64_t kRows = 32, kVocab = 32000;
  std::mt19937 gen(1);
  std::normal_distribution<float> body(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(kRows * kVocab));
  for (float& l : logits) l = body(gen);
  std::vector<SamplingRow> rules(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    rules[r].greedy = false;
    rules[r].temperature = 0.7f;
    rules[r].top_p = 0.9f;
    rules[r].uniform = (r + 0.5) / kRows;
  }
  const int threads = static_cast<int>(state.range(0));
  std::unique_ptr<Ops> ops;
  if (threads == 0) {
    ops = std::make_unique<ReferenceOps>();
  } else {
    ops = std::make_unique<CpuOps>(threads);
  }
  std::vector<SampledToken> out(kRows);
  for (auto _ : state) {
    ops->ReadBackSampled(logits.data(), kVocab, kVocab, rules, {}, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(kRows), benchmark::Counter::kIsIterationInvariantRate);
}
// 0: the reference backend (the default, one row after another); 1, 2: CpuOps' pool.
BENCHMARK(BM_ReadBackSampled)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tandem::kernels
