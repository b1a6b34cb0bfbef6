// How a layer hands a pass's segments to the per-sequence ops in as few calls as it can: a pass
// of decode rows only goes to the recurrent ops' step form (a decode batch), any other pass to
// their full form as one varlen call; attention takes every row at once, except the rows that
// Hydragen serves, around which it runs once per run of consecutive segments. On a GPU each
// call is one kernel launch, so a layer's launches do not grow with the batch.
#ifndef TANDEM_MODELS_SEGMENT_RUNS_H_
#define TANDEM_MODELS_SEGMENT_RUNS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "models/forward_context.h"

namespace tandem::models {

inline bool IsPlainDecode(const Segment& seg) { return seg.tokens == 1 && seg.snapshots.empty(); }

inline bool AllPlainDecode(std::span<const Segment> segments) {
  for (const Segment& seg : segments) {
    if (!IsPlainDecode(seg)) return false;
  }
  return true;
}

// A run of consecutive segments, whose rows are consecutive.
struct SegmentRun {
  size_t first_segment = 0;
  size_t segments = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t max_tokens = 0;  // the most rows one of its segments has
};

// run(SegmentRun) for each maximal run of consecutive segments whose skip[index] is not set
// (every segment when skip is null).
template <typename Run>
void ForEachRowRun(std::span<const Segment> segments, const bool* skip, Run&& run) {
  for (size_t s = 0; s < segments.size();) {
    if (skip != nullptr && skip[s]) {
      ++s;
      continue;
    }
    SegmentRun r{s, 0, segments[s].row, 0, 0};
    for (size_t end = s; end < segments.size() && (skip == nullptr || !skip[end]); ++end) {
      ++r.segments;
      r.rows += segments[end].tokens;
      r.max_tokens = std::max(r.max_tokens, segments[end].tokens);
    }
    run(r);
    s += r.segments;
  }
}

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SEGMENT_RUNS_H_
