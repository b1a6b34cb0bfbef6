// How a forward pass uses Hydragen's shared-prefix attention (docs/ARCHITECTURE.md, "Hydragen") for
// decode rows whose sequences share cached KV pages. Passed with each Model::Forward
// (ForwardOptions), from engine::EngineConfig down through the ModelRunner, so that two engines in
// one process (or a test beside an engine) can differ without touching process-wide state.
#ifndef TANDEM_MODELS_HYDRAGEN_CONFIG_H_
#define TANDEM_MODELS_HYDRAGEN_CONFIG_H_

#include <cstdint>

namespace tandem::models {

// A node is attended with Hydragen once (members × shared tokens) reaches this. Measured by
// bench/kernels/hydragen_bench.cc (BM_HydragenCrossover, docs/BENCHMARKS.md "Hydragen"; 32 query
// heads, 8 kv heads, head_dim 128): Hydragen was faster at every measured point, down to the
// smallest, 2 sequences × 16 tokens (one page): 1.25–1.4× with 1 thread, 1.2–1.5× with 2. The
// threshold is that smallest measured point; below it (pages under 16 tokens) nothing was
// measured, so those stay on plain attention.
inline constexpr int64_t kHydragenMinSharedWork = 32;

struct HydragenConfig {
  // Off: every decode row attends its own pages in one pass, whatever the batch shares (the
  // cache-hit ≡ miss tests compare bit for bit that way).
  bool enabled = true;
  // Shared-prefix nodes below this (members × shared tokens) join their members' suffixes.
  // 0 shares every common page (tiny test models).
  int64_t min_shared_work = kHydragenMinSharedWork;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_HYDRAGEN_CONFIG_H_
