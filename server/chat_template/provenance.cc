#include "server/chat_template/provenance.h"

#include <algorithm>

namespace tandem::chat_template {

void Taint::Add(size_t begin, size_t end) {
  if (begin >= end) return;
  if (ranges_.empty() || ranges_.back().end < begin) {
    ranges_.push_back({begin, end});
    return;
  }
  if (ranges_.back().begin <= begin) {  // overlaps or touches the last range
    ranges_.back().end = std::max(ranges_.back().end, end);
    return;
  }
  // Out of order: insert and merge overlapping or adjacent neighbours.
  ranges_.push_back({begin, end});
  std::sort(ranges_.begin(), ranges_.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::vector<ByteRange> merged;
  for (const ByteRange& r : ranges_) {
    if (!merged.empty() && merged.back().end >= r.begin) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

void Taint::Append(const Taint& other, size_t offset) {
  for (const ByteRange& r : other.ranges_) Add(r.begin + offset, r.end + offset);
}

Taint Taint::Sub(size_t begin, size_t end) const {
  Taint out;
  for (const ByteRange& r : ranges_) {
    if (r.end <= begin) continue;
    if (r.begin >= end) break;
    out.Add(std::max(r.begin, begin) - begin, std::min(r.end, end) - begin);
  }
  return out;
}

bool Taint::Overlaps(size_t begin, size_t end) const {
  for (const ByteRange& r : ranges_) {
    if (r.begin >= end) return false;
    if (r.end > begin) return true;
  }
  return false;
}

}  // namespace tandem::chat_template
