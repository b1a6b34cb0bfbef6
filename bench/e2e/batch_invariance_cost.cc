// What batch invariance costs: the CPU backend in its batch-invariant mode (what the engine runs
// by default) against its fastest mode, on ~100M-parameter random configurations. Per preset it
// times a prefill of --prefill-tokens tokens, a decode step at batch 1 and a decode step at
// batch 16, alternating the two modes round after round so that both see the same machine
// load; each cell is the best of --rounds. Prints one markdown table with the ratios.
//
//   build/release/bench/batch_invariance_cost [--presets jamba-100m,zamba2-100m,mamba2-100m]
//                                             [--threads N] [--rounds 3]
//                                             [--prefill-tokens 512] [--decode-steps 8]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cache/arena_allocator.h"
#include "engine/model_runner.h"
#include "engine/sequence_memory.h"
#include "kernels/backends.h"
#include "models/model.h"
#include "models/model_presets.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> presets = {"jamba-100m", "zamba2-100m", "mamba2-100m"};
  int threads = 0;
  int rounds = 3;
  int prefill_tokens = 512;
  int decode_steps = 8;
};

constexpr int kDecodeBatch = 16;

// One mode's runner and the sequences it works on, recreated for every measurement so that each
// starts from empty state.
class ModeTimer {
 public:
  ModeTimer(const models::Model& model, bool batch_invariant, int threads, cache::ArenaAllocator& arena)
      : model_(model), arena_(arena),
        runner_(model, kernels::MakeCpuOps(threads, batch_invariant)) {}

  // Seconds for one prefill of `tokens` tokens of one sequence.
  double Prefill(const std::vector<int32_t>& prompt) {
    auto seqs = Sequences(1, prompt.size() + 1);
    std::vector<models::SequenceInput> in = {{&seqs[0].state(), prompt, {}, false}};
    const auto start = Clock::now();
    if (!Ok(runner_.Run(in, &errors_))) return -1;
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  // Seconds per decode step of `batch` sequences after a 64-token prompt each.
  double DecodeStep(int batch, int steps) {
    const std::vector<int32_t> prompt(64, 7);
    auto seqs = Sequences(batch, prompt.size() + steps + 1);
    std::vector<models::SequenceInput> in(batch);
    for (int b = 0; b < batch; ++b) in[b] = {&seqs[b].state(), prompt, {}, false};
    if (!Ok(runner_.Run(in, &errors_))) return -1;
    std::vector<int32_t> next(batch);
    for (int b = 0; b < batch; ++b) next[b] = 5 + b;
    const auto start = Clock::now();
    for (int s = 0; s < steps; ++s) {
      for (int b = 0; b < batch; ++b) in[b] = {&seqs[b].state(), {&next[b], 1}, {}, false};
      if (!Ok(runner_.Run(in, &errors_))) return -1;
    }
    return std::chrono::duration<double>(Clock::now() - start).count() / steps;
  }

 private:
  // Whether the step and every sequence in it succeeded; prints the first failure.
  bool Ok(const absl::Status& step) const {
    absl::Status first = step;
    for (const absl::Status& e : errors_) {
      if (first.ok() && !e.ok()) first = e;
    }
    if (!first.ok()) std::fprintf(stderr, "%s\n", std::string(first.message()).c_str());
    return first.ok();
  }

  std::vector<engine::SequenceMemory> Sequences(int n, size_t tokens) {
    std::vector<engine::SequenceMemory> out;
    for (int i = 0; i < n; ++i) {
      auto mem = engine::SequenceMemory::Create(arena_, model_);
      if (!mem.ok() || !mem->Reserve(static_cast<int64_t>(tokens)).ok()) {
        std::fprintf(stderr, "out of arena memory\n");
        std::exit(1);
      }
      out.push_back(std::move(*mem));
    }
    return out;
  }

  const models::Model& model_;
  cache::ArenaAllocator& arena_;
  engine::ModelRunner runner_;
  std::vector<absl::Status> errors_;
};

int RunPreset(const std::string& preset, const Options& o) {
  auto model = models::RandomPresetModel(preset, 1);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const models::Model& m = **model;
  const int64_t max_tokens = std::max<int64_t>(o.prefill_tokens, 64 + o.decode_steps) + 1;
  const int64_t pages = m.layout().PagesFor(max_tokens) * kDecodeBatch;
  cache::ArenaConfig arena_config{m.layout().kv_page_bytes(),
                                  static_cast<size_t>(m.config().num_attention_layers ? pages : 0),
                                  m.layout().ssm_block_bytes(), size_t{kDecodeBatch}};
  auto arena = cache::ArenaAllocator::Create(arena_config);
  if (!arena.ok()) {
    std::fprintf(stderr, "%s\n", std::string(arena.status().message()).c_str());
    return 1;
  }
  ModeTimer fast(m, false, o.threads, **arena), invariant(m, true, o.threads, **arena);
  std::vector<int32_t> prompt(o.prefill_tokens);
  for (int i = 0; i < o.prefill_tokens; ++i) prompt[i] = 4 + (i * 7919) % 1000;
  // best[mode][measure]: prefill, decode batch 1, decode batch 16.
  double best[2][3];
  std::fill(&best[0][0], &best[0][0] + 6, 1e30);
  for (int r = 0; r < o.rounds; ++r) {
    for (int mode = 0; mode < 2; ++mode) {
      ModeTimer& t = mode == 0 ? fast : invariant;
      const double v[3] = {t.Prefill(prompt), t.DecodeStep(1, o.decode_steps),
                           t.DecodeStep(kDecodeBatch, o.decode_steps)};
      for (int k = 0; k < 3; ++k) {
        if (v[k] < 0) return 1;
        best[mode][k] = std::min(best[mode][k], v[k]);
      }
    }
  }
  const double prefill_fast = o.prefill_tokens / best[0][0];
  const double prefill_inv = o.prefill_tokens / best[1][0];
  const double d1_fast = 1 / best[0][1], d1_inv = 1 / best[1][1];
  const double d16_fast = kDecodeBatch / best[0][2], d16_inv = kDecodeBatch / best[1][2];
  std::printf("| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f | %.0f | %.0f | %.2f |\n",
              preset.c_str(), prefill_fast, prefill_inv, prefill_inv / prefill_fast, d1_fast,
              d1_inv, d1_inv / d1_fast, d16_fast, d16_inv, d16_inv / d16_fast);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--presets")) {
      o.presets = absl::StrSplit(argv[i + 1], ',', absl::SkipEmpty());
    } else if (!std::strcmp(argv[i], "--threads")) {
      o.threads = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--rounds")) {
      o.rounds = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--prefill-tokens")) {
      o.prefill_tokens = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--decode-steps")) {
      o.decode_steps = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (o.rounds < 1 || o.prefill_tokens < 1 || o.decode_steps < 1) {
    std::fprintf(stderr, "--rounds, --prefill-tokens and --decode-steps must be >= 1\n");
    return 2;
  }
  std::printf("| preset | prefill tok/s fast | invariant | ratio | decode b1 tok/s fast | "
              "invariant | ratio | decode b16 tok/s fast | invariant | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& preset : o.presets) {
    if (tandem::RunPreset(preset, o) != 0) return 1;
  }
  return 0;
}
