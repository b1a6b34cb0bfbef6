// How a model writes a tool call in its output, which differs by family and is fixed by the
// chat template it was trained with. The OpenAI API parses calls out of the text (tool_calls.h)
// and, for tool_choice "required" or a named function, constrains the output to them
// (forced_tool_calls.h), by this format:
//
//   kHermes        <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one block per
//                  call (Granite 4.0, Hermes, Qwen 2.5)
//   kJamba         <tool_calls>[{"name": "f", "arguments": {...}}, ...]</tool_calls> (AI21 Jamba)
//   kNemotronJson  <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL> (Nemotron-H,
//                  Nemotron Nano 2)
//   kXmlFunction   <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n
//                  </tool_call> (Nemotron 3, Qwen3-Coder)
//   kNone          calls are not parsed: the answer is the model's text
#ifndef TANDEM_SERVER_TOOLS_TOOL_CALL_FORMAT_H_
#define TANDEM_SERVER_TOOLS_TOOL_CALL_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem::server {

enum class ToolCallFormat { kNone, kHermes, kJamba, kNemotronJson, kXmlFunction };

// The markers around a block of calls.
struct ToolCallMarkers {
  std::string_view start;  // empty for kNone
  std::string_view end;
};
ToolCallMarkers MarkersOf(ToolCallFormat format);

// The format a chat template's own text teaches: the markers it writes past calls with, or
// describes to the model. kNone when it shows none (or there is no template).
ToolCallFormat DetectToolCallFormat(std::string_view chat_template);

// "none", "hermes", "jamba", "nemotron-json", "xml-function".
std::string_view ToolCallFormatName(ToolCallFormat format);
// A name as ToolCallFormatName writes it; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TOOLS_TOOL_CALL_FORMAT_H_
