// How a layer hands a pass's segments to the per-sequence ops in as few calls as it can: a pass
// of decode rows only goes to the recurrent ops' step form (a decode batch), any other pass to
// their full form as one varlen call; attention takes every row at once, except the rows that
// Hydragen serves, around which it runs once per run of consecutive segments. On a GPU each
// call is one kernel launch, so a layer's launches do not grow with the batch.
#ifndef TANDEM_MODELS_SEGMENT_RUNS_H_
#define TANDEM_MODELS_SEGMENT_RUNS_H_

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

// run(first_row, rows) for each maximal run of consecutive segments whose skip[index] is not
// set (every segment when skip is null): their rows are consecutive.
template <typename Run>
void ForEachRowRun(std::span<const Segment> segments, const bool* skip, Run&& run) {
  for (size_t s = 0; s < segments.size();) {
    if (skip != nullptr && skip[s]) {
      ++s;
      continue;
    }
    size_t end = s;
    int64_t rows = 0;
    while (end < segments.size() && (skip == nullptr || !skip[end])) rows += segments[end++].tokens;
    run(segments[s].row, rows);
    s = end;
  }
}

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SEGMENT_RUNS_H_
