#include "engine/stop_strings.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/unicode_utf8.h"

namespace tandem::engine {

absl::Status ValidateStopStrings(const std::vector<std::string>& stop_strings) {
  if (stop_strings.size() > kMaxStopStrings) {
    return absl::InvalidArgumentError(absl::StrCat("stop_strings: at most ", kMaxStopStrings,
                                                   " are allowed, got ", stop_strings.size()));
  }
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    const std::string& s = stop_strings[i];
    if (s.empty())
      return absl::InvalidArgumentError(absl::StrCat("stop_strings[", i, "] is empty"));
    if (s.size() > kMaxStopStringBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop_strings[", i, "] must be at most ", kMaxStopStringBytes, " bytes, got ", s.size()));
    }
    if (!models::IsValidUtf8(s)) {
      return absl::InvalidArgumentError(absl::StrCat("stop_strings[", i, "] is not valid UTF-8"));
    }
  }
  return absl::OkStatus();
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings)
    : stops_(std::move(stop_strings)) {
  for (const std::string& s : stops_) longest_ = std::max(longest_, s.size());
}

const std::string& StopStringMatcher::matched() const {
  static const std::string kNone;
  return matched_ >= 0 ? stops_[matched_] : kNone;
}

bool StopStringMatcher::Add(std::string_view delta, std::string* out) {
  if (stopped()) return true;
  held_.append(delta);
  // Earliest completion; on a tie, earliest start.
  size_t best_end = std::string::npos, best_start = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& s = stops_[i];
    if (s.empty()) continue;
    const size_t pos = held_.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_end = end;
      best_start = pos;
      matched_ = static_cast<int>(i);
    }
  }
  if (stopped()) {
    out->append(held_, 0, best_start);
    held_.clear();
    return true;
  }
  // Hold back the longest suffix that some stop string starts with; anything before it can no
  // longer be the start of a match (it would have to be a complete one, found above). Only the
  // last longest_ - 1 bytes can be such a suffix, which bounds the work per call.
  size_t keep_from = held_.size();
  const size_t first = held_.size() - std::min(held_.size(), longest_ > 0 ? longest_ - 1 : 0);
  for (size_t p = first; p < held_.size() && keep_from == held_.size(); ++p) {
    const std::string_view suffix = std::string_view(held_).substr(p);
    for (const std::string& s : stops_) {
      if (s.size() > suffix.size() && s.compare(0, suffix.size(), suffix) == 0) {
        keep_from = p;
        break;
      }
    }
  }
  out->append(held_, 0, keep_from);
  held_.erase(0, keep_from);
  return false;
}

void StopStringMatcher::Flush(std::string* out) {
  if (stopped()) return;
  out->append(held_);
  held_.clear();
}

}  // namespace tandem::engine
