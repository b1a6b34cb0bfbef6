// The host sampler's cost per row (BatchSampler::SampleRow, which every CPU step and every
// logprobs request pays), by rule and by the shape of the row: "peaked" has ten tokens far above
// a Gaussian body (a confident model: small nucleus), "flat" is the Gaussian body alone (a large
// nucleus). Arguments: vocabulary, peaked (1/0), rule (0 temperature only, 1 + top-p 0.9,
// 2 + top-k 50).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/sampler.h"

namespace tandem::engine {
namespace {

std::vector<float> Logits(int32_t vocab, bool peaked) {
  std::mt19937 gen(1);
  std::normal_distribution<float> body(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = body(gen);
  if (peaked) {
    for (int i = 0; i < 10; ++i) logits[(i * 7919) % vocab] = 14.0f - 0.4f * i;
  }
  return logits;
}

void BM_SampleRow(benchmark::State& state) {
  const int32_t vocab = static_cast<int32_t>(state.range(0));
  const std::vector<float> logits = Logits(vocab, state.range(1) != 0);
  SamplingParams params;
  params.greedy = false;
  params.temperature = 0.7f;
  params.seed = 3;
  if (state.range(2) == 1) params.top_p = 0.9f;
  if (state.range(2) == 2) params.top_k = 50;
  BatchSampler sampler(vocab);
  SamplingState sequence(params);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.SampleRow(logits, sequence).token);
}
BENCHMARK(BM_SampleRow)
    ->ArgsProduct({{32000, 131072}, {1, 0}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::engine
