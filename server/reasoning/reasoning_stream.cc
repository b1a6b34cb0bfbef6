#include "server/reasoning/reasoning_stream.h"

#include <algorithm>

namespace tandem::server {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

size_t LeadingSpace(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && IsSpace(text[n])) ++n;
  return n;
}

// The length of the longest end of `text` that is a proper start of `marker` (a marker that may
// be completed by the next text).
size_t PartialMarkerAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

}  // namespace

ReasoningStream::ReasoningStream(ReasoningFormat format, bool opened)
    : markers_(ReasoningMarkersOf(format)),
      where_(format == ReasoningFormat::kNone ? Where::kAnswer
             : opened                         ? Where::kOpenedStart
                                              : Where::kStart),
      reasoned_(format != ReasoningFormat::kNone && opened) {}

ReasoningPiece ReasoningStream::Feed(std::string_view text) {
  ReasoningPiece out;
  held_.append(text);
  for (;;) {
    std::string_view held = held_;
    switch (where_) {
      case Where::kStart:
      case Where::kOpenedStart: {
        const std::string_view rest = held.substr(LeadingSpace(held));
        if (rest.starts_with(markers_.start)) {
          held_.erase(0, held.size() - rest.size() + markers_.start.size());
          where_ = Where::kInside;
          reasoned_ = true;
          continue;
        }
        if (markers_.start.starts_with(rest)) return out;  // whitespace, or a marker's start
        where_ = where_ == Where::kStart ? Where::kAnswer : Where::kInside;
        continue;
      }
      case Where::kInside: {
        const size_t end = held.find(markers_.end);
        if (end != std::string_view::npos) {
          out.reasoning.append(held.substr(0, end));
          held_.erase(0, end + markers_.end.size());
          where_ = Where::kAfterEnd;
          continue;
        }
        const size_t keep = PartialMarkerAtEnd(held, markers_.end);
        out.reasoning.append(held.substr(0, held.size() - keep));
        held_.erase(0, held.size() - keep);
        return out;
      }
      case Where::kAfterEnd: {
        const size_t space = LeadingSpace(held);
        held_.erase(0, space);
        if (held_.empty()) return out;  // more whitespace may follow
        where_ = Where::kAnswer;
        continue;
      }
      case Where::kAnswer:
        out.content.append(held_);
        held_.clear();
        return out;
    }
  }
}

ReasoningPiece ReasoningStream::Finish() {
  ReasoningPiece out;
  if (where_ == Where::kInside || where_ == Where::kOpenedStart) {
    out.reasoning = std::move(held_);
  } else {
    out.content = std::move(held_);  // at the start: whitespace or a marker's start, all answer
  }
  held_.clear();
  return out;
}

ReasoningPiece SplitReasoning(ReasoningFormat format, bool opened, std::string_view text) {
  ReasoningStream stream(format, opened);
  ReasoningPiece whole = stream.Feed(text);
  ReasoningPiece rest = stream.Finish();
  whole.reasoning += rest.reasoning;
  whole.content += rest.content;
  return whole;
}

}  // namespace tandem::server
