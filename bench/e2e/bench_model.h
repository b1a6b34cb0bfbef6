// What the end-to-end benches that run a checkpoint or a random preset through the scheduler
// share: their flags (--preset, --model, --threads, --prompt, --tokens, and a bench's own), the
// model with its prompt and cache spec, and the host allocator each run gets.
#ifndef TANDEM_BENCH_E2E_BENCH_MODEL_H_
#define TANDEM_BENCH_E2E_BENCH_MODEL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/allocator_factory.h"
#include "cache/model_spec.h"
#include "engine/cache_model_spec.h"
#include "models/model.h"
#include "models/model_presets.h"
#include "models/status_macros.h"
#include "models/tokenizer.h"

namespace tandem::bench {

struct BenchFlags {
  std::string preset = "zamba2-100m";
  std::string model_dir;  // a checkpoint instead of the random preset
  int threads = 0;        // 0: one per core
  int prompt = 128;       // prompt tokens (about, with a checkpoint)
  int tokens = 64;        // new tokens per request
  // The model's name in the report.
  const std::string& name() const { return model_dir.empty() ? preset : model_dir; }
};

// Reads the shared flags into `flags` and the bench's own integer flags (`extra`: name, where);
// false, having said why on stderr, for an unknown flag.
inline bool ReadBenchFlags(int argc, char** argv, BenchFlags* flags,
                           std::initializer_list<std::pair<const char*, int*>> extra = {}) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* flag = argv[i];
    const char* value = argv[i + 1];
    if (!std::strcmp(flag, "--preset")) {
      flags->preset = value;
    } else if (!std::strcmp(flag, "--model")) {
      flags->model_dir = value;
    } else if (!std::strcmp(flag, "--threads")) {
      flags->threads = std::atoi(value);
    } else if (!std::strcmp(flag, "--prompt")) {
      flags->prompt = std::atoi(value);
    } else if (!std::strcmp(flag, "--tokens")) {
      flags->tokens = std::atoi(value);
    } else {
      bool known = false;
      for (const auto& [name, where] : extra) {
        if (!std::strcmp(flag, name)) {
          *where = std::atoi(value);
          known = true;
        }
      }
      if (!known) {
        std::fprintf(stderr, "unknown flag %s\n", flag);
        return false;
      }
    }
  }
  return true;
}

// The prompt: with a checkpoint, its tokenizer's ids for the start of a novel, repeated up to
// about `prompt_tokens` ids; with a random model (`model_dir` empty), arbitrary ids below 1004.
inline absl::StatusOr<std::vector<int32_t>> NovelPrompt(const std::string& model_dir,
                                                        int prompt_tokens) {
  std::vector<int32_t> prompt;
  if (model_dir.empty()) {
    for (int i = 0; i < prompt_tokens; ++i) prompt.push_back(4 + (i * 7919) % 1000);
    return prompt;
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tokenizer,
                          models::LoadTokenizer(model_dir));
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<int32_t> sentence,
      tokenizer->Encode("It is a truth universally acknowledged, that a single man in "
                        "possession of a good fortune, must be in want of a wife. ",
                        /*add_special_tokens=*/false));
  while (static_cast<int>(prompt.size()) < prompt_tokens) {
    prompt.insert(prompt.end(), sentence.begin(), sentence.end());
  }
  return prompt;
}

struct BenchModel {
  std::unique_ptr<models::Model> model;
  std::vector<int32_t> prompt;
  cache::ModelSpec spec;
};

// The flags' model (the checkpoint, or the preset with random weights), prompt and cache spec.
inline absl::StatusOr<BenchModel> LoadBenchModel(const BenchFlags& flags) {
  BenchModel bench;
  TANDEM_ASSIGN_OR_RETURN(bench.model, flags.model_dir.empty()
                                           ? models::RandomPresetModel(flags.preset, 1)
                                           : models::Model::Load(flags.model_dir));
  TANDEM_ASSIGN_OR_RETURN(bench.prompt, NovelPrompt(flags.model_dir, flags.prompt));
  TANDEM_ASSIGN_OR_RETURN(bench.spec,
                          engine::CacheModelSpecFor(bench.model->config(), flags.preset));
  return bench;
}

// 4 GiB of host memory under AVMP, for a run's KV pages and SSM blocks.
inline absl::StatusOr<cache::NamedAllocator> HostAllocator(const BenchModel& bench) {
  cache::AllocatorOptions options;
  options.budget_bytes = size_t{4} << 30;
  options.page_tokens = static_cast<size_t>(bench.model->layout().page_tokens());
  options.backing = cache::BackingKind::kHost;
  return cache::CreateAllocator("avmp-dynamic", bench.spec, options);
}

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_E2E_BENCH_MODEL_H_
