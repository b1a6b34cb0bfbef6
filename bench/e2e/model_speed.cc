// End-to-end prefill and decode speed of ~100M-parameter random configurations of each family,
// set against what this machine can do: its memory bandwidth (decode at batch 1 streams every
// weight once per token) and its GEMM peak (prefill is GEMM-bound). Prints one markdown table,
// one row per family and weight storage.
//
//   build/release/bench/model_speed [--threads N] [--prefill-tokens 512] [--decode-tokens 64]
//                                   [--weight-dtypes f32,bf16,int8]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/e2e/model_figures.h"
#include "kernels/backends.h"
#include "kernels/cpu/thread_pool.h"
#include "models/model.h"
#include "models/model_presets.h"
#include "models/weight_store.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Read bandwidth: every thread sums its slice of a buffer much larger than the caches.
double MeasureReadBandwidth(kernels::ThreadPool& pool) {
  const size_t floats = size_t{1} << 28;  // 1 GiB
  std::vector<float> buffer(floats, 1.0f);
  const int64_t parts = pool.size() * 4;
  std::vector<double> sums(parts);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = Clock::now();
    pool.Run(parts, [&](int64_t p) {
      const size_t begin = floats / parts * p, end = floats / parts * (p + 1);
      float acc[16] = {};
      for (size_t i = begin; i < end; i += 16) {
        for (int j = 0; j < 16; ++j) acc[j] += buffer[i + j];
      }
      sums[p] = std::accumulate(acc, acc + 16, 0.0);
    });
    best = std::max(best, floats * sizeof(float) / Seconds(start, Clock::now()));
  }
  if (std::accumulate(sums.begin(), sums.end(), 0.0) != static_cast<double>(floats)) {
    std::fprintf(stderr, "bandwidth check sum is wrong\n");
  }
  return best;
}

// The backend's own matrix multiply at a large square size: the ceiling for prefill.
double MeasureGemmPeak(kernels::Ops& ops) {
  const int64_t n = 2048;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = Clock::now();
    ops.Linear(a.data(), n, n, kernels::WeightMatrix::F32(b.data(), n, n), nullptr, c.data(), n);
    best = std::max(best, 2.0 * n * n * n / Seconds(start, Clock::now()));
  }
  return best;
}

int Main(int argc, char** argv) {
  int threads = 0;
  int64_t prefill_tokens = 512, decode_tokens = 64;
  std::vector<models::WeightStorage> storages = {models::WeightStorage::kF32};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--weight-dtypes")) {
      storages.clear();
      for (absl::string_view name : absl::StrSplit(argv[i + 1], ',')) {
        auto storage = models::ParseWeightStorage(std::string(name));
        if (!storage.ok()) {
          std::fprintf(stderr, "%s\n", std::string(storage.status().message()).c_str());
          return 2;
        }
        storages.push_back(*storage);
      }
    }
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--prefill-tokens")) prefill_tokens = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--decode-tokens")) decode_tokens = std::atoll(argv[i + 1]);
  }
  auto ops = kernels::MakeCpuOps(threads);
  kernels::ThreadPool pool(threads);
  const double bandwidth = MeasureReadBandwidth(pool);
  const double gemm_peak = MeasureGemmPeak(*ops);
  std::printf("threads: %d, read bandwidth: %.1f GB/s, GEMM peak (2048^3): %.1f GFLOP/s\n\n",
              pool.size(), bandwidth / 1e9, gemm_peak / 1e9);
  std::printf(
      "| family | weights | params | weight MB | prefill tok/s (%lld) | prefill GFLOP/s | "
      "÷ GEMM peak | decode tok/s (batch 1) | weight GB/s | ÷ bandwidth |\n",
      static_cast<long long>(prefill_tokens));
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");

  for (const std::string& preset : models::ModelPresetNames()) {
   for (const models::WeightStorage storage : storages) {
    const std::string family = preset.substr(0, preset.find('-'));
    const char* name = family.c_str();
    models::LoadOptions load;
    load.weight_storage = storage;
    auto model = models::RandomPresetModel(preset, 1, load);
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, std::string(model.status().message()).c_str());
      return 1;
    }
    const models::Model& m = **model;
    const bench::ModelFigures f = bench::Estimate(m);
    const int64_t vocab = m.config().vocab_size;
    kernels::Workspace ws;
    std::vector<int32_t> prompt(prefill_tokens);
    for (int64_t i = 0; i < prefill_tokens; ++i)
      prompt[i] = static_cast<int32_t>(3 + i * 7 % 16000);
    std::vector<float> logits(vocab);

    // One buffer set reused by every run; pages for prompt + decode.
    const int64_t positions = prefill_tokens + decode_tokens;
    std::vector<float> ssm(std::max<int64_t>(m.layout().ssm_block_floats(), 1));
    std::vector<std::vector<float>> pages(
        m.config().num_attention_layers > 0 ? m.layout().PagesFor(positions) : 0,
        std::vector<float>(m.layout().kv_page_floats()));
    auto fresh = [&]() {
      models::SequenceState s;
      std::fill(ssm.begin(), ssm.end(), 0.0f);
      s.ssm = ssm.data();
      for (auto& p : pages) s.kv_pages.push_back(p.data());
      return s;
    };

    double prefill_best = 1e30, decode_best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      models::SequenceState state = fresh();
      const models::SequenceInput in{&state, prompt, {}, false};
      auto start = Clock::now();
      if (!m.Forward(*ops, ws, {&in, 1}, logits.data()).ok()) return 1;
      prefill_best = std::min(prefill_best, Seconds(start, Clock::now()));
      start = Clock::now();
      for (int64_t t = 0; t < decode_tokens; ++t) {
        const int32_t token = static_cast<int32_t>(t % 1000 + 3);
        const models::SequenceInput step{&state, {&token, 1}, {}, false};
        if (!m.Forward(*ops, ws, {&step, 1}, logits.data()).ok()) return 1;
      }
      decode_best = std::min(decode_best, Seconds(start, Clock::now()));
    }
    const double prefill_tps = prefill_tokens / prefill_best;
    const double decode_tps = decode_tokens / decode_best;
    const double prefill_flops = prefill_tps * f.prefill_flops_per_token;
    const double weight_rate = decode_tps * f.decode_bytes_per_token;
    std::printf("| %s | %s | %.1fM | %.0f | %.0f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", name,
                std::string(models::WeightStorageName(storage)).c_str(), f.params / 1e6,
                m.weight_bytes() / 1e6, prefill_tps, prefill_flops / 1e9,
                prefill_flops / gemm_peak, decode_tps, weight_rate / 1e9,
                weight_rate / bandwidth);
    std::fflush(stdout);
   }
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }
