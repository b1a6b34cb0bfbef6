#include "server/reasoning/reasoning_format.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::server {

ReasoningMarkers ReasoningMarkersOf(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kThink:
      return {"<think>", "</think>"};
    case ReasoningFormat::kNone:
      break;
  }
  return {"", ""};
}

ReasoningFormat DetectReasoningFormat(std::string_view chat_template) {
  // The end marker, not the start: every template that knows the block names its end (to cut
  // past turns' reasoning, or to write an empty block when reasoning is off).
  return chat_template.find("</think>") != std::string_view::npos ? ReasoningFormat::kThink
                                                                  : ReasoningFormat::kNone;
}

std::string_view ReasoningFormatName(ReasoningFormat format) {
  return format == ReasoningFormat::kThink ? "think" : "none";
}

absl::StatusOr<ReasoningFormat> ParseReasoningFormat(std::string_view name) {
  for (ReasoningFormat format : {ReasoningFormat::kNone, ReasoningFormat::kThink}) {
    if (name == ReasoningFormatName(format)) return format;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reasoning format '", std::string(name), "'; one of none, think"));
}

}  // namespace tandem::server
