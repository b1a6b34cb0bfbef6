// Decode throughput against batch size: B sequences decode together through one ModelRunner step
// (their rows share every GEMM), versus batch 1. Decode at small batch is bound by reading the
// weights, so batching should multiply tokens/s until compute takes over. Prints one markdown
// table with ratios to batch 1, measured in one run.
//
//   build/release/bench/decode_batching [--preset jamba-100m] [--threads N] [--steps 24]
//                                       [--context 128] [--gemm auto|own|blas|invariant]
// (--gemm invariant: the engine's default batch-invariant mode, kernels::CpuOps::set_batch_invariant)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cache/arena_allocator.h"
#include "engine/model_runner.h"
#include "engine/sequence_memory.h"
#include "kernels/backends.h"
#include "kernels/cpu/cpu_ops.h"
#include "models/model.h"
#include "models/model_presets.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

int Run(const std::string& preset, int threads, int steps, int context, const std::string& gemm) {
  auto model = models::RandomPresetModel(preset, 1);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const models::Model& m = **model;
  auto ops = std::make_unique<kernels::CpuOps>(threads);
  if (gemm == "blas") ops->set_gemm_impl(kernels::GemmImpl::kBlas);
  if (gemm == "own") ops->set_gemm_impl(kernels::GemmImpl::kOwn);
  if (gemm == "invariant") ops->set_batch_invariant(true);
  engine::ModelRunner runner(m, std::move(ops));
  const int batches[] = {1, 2, 4, 8, 16, 32};
  const int max_batch = 32;
  const int64_t pages_per_seq = m.layout().PagesFor(context + steps + 1);
  cache::ArenaConfig arena_config{m.layout().kv_page_bytes(),
                                  m.config().num_attention_layers
                                      ? static_cast<size_t>(pages_per_seq * max_batch)
                                      : 0,
                                  m.layout().ssm_block_bytes(), static_cast<size_t>(max_batch)};
  auto arena = cache::ArenaAllocator::Create(arena_config);
  if (!arena.ok()) {
    std::fprintf(stderr, "%s\n", std::string(arena.status().message()).c_str());
    return 1;
  }
  std::printf("%s, %.1fM parameters, context %d, %d decode steps per batch size\n\n",
              preset.c_str(), m.parameters() / 1e6, context, steps);
  std::printf("| batch | tokens/s | × batch 1 |\n|---|---|---|\n");
  double base = 0;
  std::vector<absl::Status> errors;
  for (int batch : batches) {
    std::vector<engine::SequenceMemory> memories;
    std::vector<int32_t> prompt(context), next(batch);
    for (int i = 0; i < context; ++i) prompt[i] = 4 + (i * 7919) % 1000;
    for (int b = 0; b < batch; ++b) {
      auto mem = engine::SequenceMemory::Create(**arena, m);
      if (!mem.ok() || !mem->Reserve(context + steps + 1).ok()) {
        std::fprintf(stderr, "out of arena memory\n");
        return 1;
      }
      memories.push_back(std::move(*mem));
    }
    std::vector<models::SequenceInput> inputs(batch);
    for (int b = 0; b < batch; ++b) inputs[b] = {&memories[b].state(), prompt, {}, false};
    if (!runner.Run(inputs, &errors).ok()) return 1;
    for (int b = 0; b < batch; ++b) next[b] = 5 + b;
    auto run_step = [&] {
      for (int b = 0; b < batch; ++b) inputs[b] = {&memories[b].state(), {&next[b], 1}, {}, false};
      return runner.Run(inputs, &errors).ok();
    };
    if (!run_step()) return 1;  // warm-up
    const auto start = Clock::now();
    for (int s = 1; s < steps; ++s) {
      if (!run_step()) return 1;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const double tps = batch * (steps - 1) / seconds;
    if (batch == 1) base = tps;
    std::printf("| %d | %.1f | %.2f |\n", batch, tps, tps / base);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  std::string preset = "jamba-100m", gemm = "auto";
  int threads = 0, steps = 24, context = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--preset"))
      preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps"))
      steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--context"))
      context = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gemm"))
      gemm = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (gemm != "auto" && gemm != "own" && gemm != "blas" && gemm != "invariant") {
    std::fprintf(stderr, "--gemm must be auto, own, blas or invariant, got %s\n", gemm.c_str());
    return 2;
  }
  if (steps < 2 || context < 1) {
    std::fprintf(stderr, "--steps must be >= 2 and --context >= 1\n");
    return 2;
  }
  return tandem::Run(preset, threads, steps, context, gemm);
}
