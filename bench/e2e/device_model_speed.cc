// End-to-end prefill and decode speed of the ~100M-parameter random configurations of each
// family on a compute device (`--device cpu|cuda|cuda:N`), through the path the server takes:
// weights placed on the device, KV pages and SSM blocks in the device's memory, Generate's
// prefill chunks and greedy decode steps. Set against what the device can do, measured in the
// same run through its own backend: its copy bandwidth (a 1 GiB CopyRows; decode at batch 1
// streams every weight once per token) and its GEMM rate (Linear at 2048³; prefill is
// GEMM-bound). On a GPU, decode runs a second time with CUDA graphs (--gpu-graphs), whose
// tokens must be the same; and on either device prefill and decode run again with the
// batch-invariant kernels (the engine's default), their speed against the fast ones' ("×" is
// invariant ÷ fast). scripts/gpu-check.sh runs it with --device cuda. One markdown table,
// one row per family and weight format.
//
//   device_model_speed [--device cuda] [--prefill-tokens 512] [--decode-tokens 64]
//                      [--weight-dtypes f32,bf16] [--threads N] [--presets jamba-100m,...]
//                      [--no-graphs] [--verbose]
//
// --presets runs only the named presets; --no-graphs leaves the CUDA-graph decode out (its
// columns read "–"); --verbose says on stderr which preset and which run is under way, so that
// a run that dies names the step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/e2e/model_figures.h"
#include "cache/arena_allocator.h"
#include "engine/compute_device.h"
#include "engine/generator.h"
#include "kernels/workspace.h"
#include "models/model.h"
#include "models/model_presets.h"
#include "models/weight_store.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Bytes per second a copy moves through the backend, reads plus writes, best of five: the
// ceiling for memory-bound work (the same measure as cuda_kernels_bench's).
double MeasureCopyBandwidth(kernels::Ops& ops) {
  const int64_t cols = 1 << 16, rows = (int64_t{1} << 28) / cols;  // 1 GiB of floats
  kernels::Workspace ws(size_t{1} << 20, &ops.activation_memory());
  float* src = ws.Floats(rows * cols);
  float* dst = ws.Floats(rows * cols);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = Clock::now();
    ops.CopyRows(src, cols, rows, cols, dst, cols);
    if (!ops.ReadBack(dst, 0, nullptr).empty()) return 0;
    best = std::max(best, 2.0 * rows * cols * sizeof(float) / Seconds(start, Clock::now()));
  }
  return best;
}

// The backend's Linear at 2048³ with fp32 weights in its memory: the ceiling for prefill.
double MeasureGemmRate(kernels::Ops& ops) {
  const int64_t n = 2048;
  kernels::Workspace ws(size_t{1} << 20, &ops.activation_memory());
  float* a = ws.Floats(n * n);
  float* b = ws.Floats(n * n);
  float* c = ws.Floats(n * n);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = Clock::now();
    ops.Linear(a, n, n, kernels::WeightMatrix::F32(b, n, n), nullptr, c, n);
    if (!ops.ReadBack(c, 0, nullptr).empty()) return 0;
    best = std::max(best, 2.0 * n * n * n / Seconds(start, Clock::now()));
  }
  return best;
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "device_model_speed: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  // Line by line even into a file: a run that dies (gpu-check.sh keeps its output) shows how far
  // it got.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string device_name = "cpu";
  int threads = 0;
  int64_t prefill_tokens = 512, decode_tokens = 64;
  std::vector<std::string> presets = models::ModelPresetNames();
  bool graphs_wanted = true, verbose = false;
  std::vector<models::WeightStorage> storages = {models::WeightStorage::kF32,
                                                 models::WeightStorage::kBF16};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-graphs") {
      graphs_wanted = false;
      continue;
    }
    if (flag == "--verbose") {
      verbose = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "device_model_speed: %s needs a value\n", flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--device") {
      device_name = value;
    } else if (flag == "--threads") {
      threads = std::atoi(value);
    } else if (flag == "--prefill-tokens") {
      prefill_tokens = std::atoll(value);
    } else if (flag == "--decode-tokens") {
      decode_tokens = std::atoll(value);
    } else if (flag == "--presets") {
      const std::vector<std::string> known = models::ModelPresetNames();
      presets = absl::StrSplit(value, ',');
      for (const std::string& name : presets) {
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          std::fprintf(stderr, "device_model_speed: --presets: no preset '%s'\n", name.c_str());
          return 2;
        }
      }
    } else if (flag == "--weight-dtypes") {
      storages.clear();
      for (absl::string_view name : absl::StrSplit(value, ',')) {
        auto storage = models::ParseWeightStorage(std::string(name));
        if (!storage.ok()) return Fail("--weight-dtypes", storage.status());
        storages.push_back(*storage);
      }
    } else {
      std::fprintf(stderr, "device_model_speed: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (prefill_tokens < 1 || decode_tokens < 1) {
    std::fprintf(stderr, "device_model_speed: token counts must be positive\n");
    return 2;
  }
  auto device = engine::ComputeDevice::Open(device_name);
  if (!device.ok()) return Fail("--device " + device_name, device.status());
  auto ops = (*device)->CreateOps({.threads = threads});
  if (!ops.ok()) return Fail("backend", ops.status());
  // The engine's default kernels (batch-invariant: a cache hit gives the bits of a miss), timed
  // against the fast ones Generate takes by default, in the same run.
  auto invariant_ops = (*device)->CreateOps({.threads = threads, .batch_invariant = true});
  if (!invariant_ops.ok()) return Fail("batch-invariant backend", invariant_ops.status());
  std::unique_ptr<kernels::Ops> graph_ops;
  if (!(*device)->on_host() && graphs_wanted) {
    auto created = (*device)->CreateOps({.threads = threads, .cuda_graphs = true});
    if (!created.ok()) return Fail("backend with CUDA graphs", created.status());
    graph_ops = *std::move(created);
  }
  const double bandwidth = MeasureCopyBandwidth(**ops);
  const double gemm_rate = MeasureGemmRate(**ops);
  if (bandwidth <= 0 || gemm_rate <= 0) {
    std::fprintf(stderr, "device_model_speed: the backend failed while measuring the device\n");
    return 1;
  }
  std::printf("device: %s (%s backend), copy bandwidth %.1f GB/s, Linear 2048^3: %.1f GFLOP/s\n\n",
              (*device)->name().c_str(), std::string((*ops)->name()).c_str(), bandwidth / 1e9,
              gemm_rate / 1e9);
  std::printf(
      "| family | weights | params | weight MB | prefill tok/s (%lld) | prefill GFLOP/s | "
      "÷ Linear 2048³ | decode tok/s (batch 1) | weight GB/s | ÷ copy bandwidth | "
      "decode tok/s, CUDA graphs | × | prefill tok/s, batch-invariant | × | "
      "decode tok/s, batch-invariant | × |\n",
      static_cast<long long>(prefill_tokens));
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");

  std::vector<int32_t> prompt(prefill_tokens);
  for (int64_t i = 0; i < prefill_tokens; ++i) prompt[i] = static_cast<int32_t>(3 + i * 7 % 16000);
  // --verbose: the step about to run, on stderr.
  auto step = [&](const std::string& what, int rep) {
    if (verbose) std::fprintf(stderr, "device_model_speed: %s, run %d\n", what.c_str(), rep + 1);
  };
  for (const std::string& preset : presets) {
    for (const models::WeightStorage storage : storages) {
      const std::string family = preset.substr(0, preset.find('-'));
      models::LoadOptions load;
      load.weight_storage = storage;
      load.placer = (*device)->weight_placer();
      auto model = models::RandomPresetModel(preset, 1, load);
      if (!model.ok()) return Fail(preset, model.status());
      const models::Model& m = **model;
      const int64_t positions = prefill_tokens + decode_tokens;
      cache::ArenaConfig arena{
          .kv_page_bytes = m.layout().kv_page_bytes(),
          .kv_pages = m.config().num_attention_layers > 0
                          ? static_cast<size_t>(m.layout().PagesFor(positions))
                          : 0u,
          .ssm_block_bytes = m.layout().ssm_block_bytes(),
          .ssm_blocks = m.config().num_ssm_layers > 0 ? 1u : 0u};
      auto pools = (*device)->on_host()
                       ? cache::ArenaAllocator::Create(arena)
                       : cache::ArenaAllocator::Create(arena, [&](size_t bytes) {
                           return (*device)->CreateStateBacking(bytes);
                         });
      if (!pools.ok()) return Fail(preset + " state memory", pools.status());
      engine::GenerateOptions options;
      options.max_new_tokens = static_cast<int32_t>(decode_tokens);
      options.prefill_chunk = prefill_tokens;  // the whole prompt in one pass
      double prefill_best = 1e30, decode_best = 1e30, graph_decode_best = 1e30;
      std::vector<int32_t> tokens, graph_tokens;
      for (int rep = 0; rep < 3; ++rep) {  // the first also warms the backend's memory up
        step(preset + " fast kernels", rep);
        auto result = engine::Generate(m, **ops, **pools, prompt, options);
        if (!result.ok()) return Fail(preset, result.status());
        prefill_best = std::min(prefill_best, result->prefill_seconds);
        // The first new token comes from the prefill; the steps after it are decode.
        const double steps = std::max<double>(1, result->output_ids.size() - 1.0);
        decode_best = std::min(decode_best, result->decode_seconds / steps);
        tokens = result->output_ids;
      }
      for (int rep = 0; graph_ops != nullptr && rep < 3; ++rep) {
        step(preset + " CUDA graphs", rep);
        auto result = engine::Generate(m, *graph_ops, **pools, prompt, options);
        if (!result.ok()) return Fail(preset + " with CUDA graphs", result.status());
        const double steps = std::max<double>(1, result->output_ids.size() - 1.0);
        graph_decode_best = std::min(graph_decode_best, result->decode_seconds / steps);
        graph_tokens = result->output_ids;
      }
      double invariant_prefill_best = 1e30, invariant_decode_best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        step(preset + " batch-invariant kernels", rep);
        auto result = engine::Generate(m, **invariant_ops, **pools, prompt, options);
        if (!result.ok()) return Fail(preset + " with batch-invariant kernels", result.status());
        invariant_prefill_best = std::min(invariant_prefill_best, result->prefill_seconds);
        const double steps = std::max<double>(1, result->output_ids.size() - 1.0);
        invariant_decode_best = std::min(invariant_decode_best, result->decode_seconds / steps);
      }
      if (graph_ops != nullptr && graph_tokens != tokens) {
        std::fprintf(stderr, "device_model_speed: %s: CUDA graphs decoded other tokens\n",
                     preset.c_str());
        return 1;
      }
      const bench::ModelFigures f = bench::Estimate(m);
      const double prefill_tps = prefill_tokens / prefill_best;
      const double decode_tps = 1.0 / decode_best;
      const double prefill_flops = prefill_tps * f.prefill_flops_per_token;
      const double weight_rate = decode_tps * f.decode_bytes_per_token;
      std::string graphs = "– | –";
      if (graph_ops != nullptr) {
        char cell[64];
        std::snprintf(cell, sizeof(cell), "%.1f | %.2f", 1.0 / graph_decode_best,
                      decode_best / graph_decode_best);
        graphs = cell;
      }
      std::printf(
          "| %s | %s | %.1fM | %.0f | %.0f | %.1f | %.2f | %.1f | %.1f | %.2f | %s | %.0f | %.2f | "
          "%.1f | %.2f |\n",
          family.c_str(), std::string(models::WeightStorageName(storage)).c_str(), f.params / 1e6,
          m.weight_bytes() / 1e6, prefill_tps, prefill_flops / 1e9, prefill_flops / gemm_rate,
          decode_tps, weight_rate / 1e9, weight_rate / bandwidth, graphs.c_str(),
          prefill_tokens / invariant_prefill_best, prefill_best / invariant_prefill_best,
          1.0 / invariant_decode_best, decode_best / invariant_decode_best);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }
