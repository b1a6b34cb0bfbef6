#include "server/tools/tool_call_format.h"

#include "absl/strings/str_cat.h"

namespace tandem::server {

namespace {
constexpr ToolCallFormat kNamed[] = {ToolCallFormat::kNone, ToolCallFormat::kHermes,
                                     ToolCallFormat::kJamba, ToolCallFormat::kNemotronJson,
                                     ToolCallFormat::kXmlFunction};
}  // namespace

ToolCallMarkers MarkersOf(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kXmlFunction:
      return {"<tool_call>", "</tool_call>"};
    case ToolCallFormat::kJamba:
      return {"<tool_calls>", "</tool_calls>"};
    case ToolCallFormat::kNemotronJson:
      return {"<TOOLCALL>", "</TOOLCALL>"};
    case ToolCallFormat::kNone:
      break;
  }
  return {"", ""};
}

ToolCallFormat DetectToolCallFormat(std::string_view chat_template) {
  auto has = [&](std::string_view marker) {
    return chat_template.find(marker) != std::string_view::npos;
  };
  // Most specific first: "<tool_calls>" contains "<tool_call", and the XML format also uses
  // "<tool_call>".
  if (has("<TOOLCALL>")) return ToolCallFormat::kNemotronJson;
  if (has("<tool_calls>")) return ToolCallFormat::kJamba;
  if (has("<tool_call>") && has("<function=")) return ToolCallFormat::kXmlFunction;
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  return ToolCallFormat::kNone;
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kJamba:
      return "jamba";
    case ToolCallFormat::kNemotronJson:
      return "nemotron-json";
    case ToolCallFormat::kXmlFunction:
      return "xml-function";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

absl::StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name) {
  std::string known;
  for (ToolCallFormat format : kNamed) {
    if (name == ToolCallFormatName(format)) return format;
    absl::StrAppend(&known, known.empty() ? "" : ", ", std::string(ToolCallFormatName(format)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tool-call format '", std::string(name), "'; one of ", known));
}

}  // namespace tandem::server
