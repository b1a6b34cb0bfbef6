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
// heads, 8 kv heads, head_dim 128, 2 threads): every measured point of 128 or less (2–8
// sequences × one 16-token page, 2 × 64 tokens) ran at 0.5–1.05× plain attention, merged or
// exact; every point of 256 or more (4 × 64, 8 × 64, 2 × 256 …) at 1.05–4.2×. Nothing between
// 128 and 256 was measured.
inline constexpr int64_t kHydragenMinSharedWork = 256;

struct HydragenConfig {
  // Off: every decode row attends its own pages in one pass, whatever the batch shares. On a
  // backend that resumes attention exactly (the batch-invariant CPU) that gives the same bits.
  bool enabled = true;
  // Shared-prefix nodes below this (members × shared tokens) join their members' suffixes.
  // 0 shares every common page (tiny test models).
  int64_t min_shared_work = kHydragenMinSharedWork;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_HYDRAGEN_CONFIG_H_
