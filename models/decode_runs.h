// Groups a pass's segments for the per-sequence ops: consecutive segments that each decode one
// token without snapshots have consecutive rows, so a layer hands them to one batched call (the
// recurrent ops' state_table, attention's page_tables) instead of one call per sequence, which
// on a GPU is one kernel launch per layer for the whole decode batch.
#ifndef TANDEM_MODELS_DECODE_RUNS_H_
#define TANDEM_MODELS_DECODE_RUNS_H_

#include <cstddef>
#include <span>

#include "models/forward_context.h"

namespace tandem::models {

inline bool IsPlainDecode(const Segment& seg) { return seg.tokens == 1 && seg.snapshots.empty(); }

// In segment order: batch(first, count) for each run of two or more plain decode segments,
// single(index) for every other segment. Segments with skip[index] set (when given) go to
// neither and end a run.
template <typename Batch, typename Single>
void ForEachDecodeRun(std::span<const Segment> segments, Batch&& batch, Single&& single,
                      const bool* skip = nullptr) {
  auto skipped = [&](size_t s) { return skip != nullptr && skip[s]; };
  for (size_t s = 0; s < segments.size();) {
    if (skipped(s)) {
      ++s;
      continue;
    }
    size_t end = s;
    while (end < segments.size() && !skipped(end) && IsPlainDecode(segments[end])) ++end;
    if (end - s >= 2) {
      batch(s, end - s);
      s = end;
    } else {
      single(s);
      ++s;
    }
  }
}

}  // namespace tandem::models

#endif  // TANDEM_MODELS_DECODE_RUNS_H_
