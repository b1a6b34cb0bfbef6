// What a chat request asks of tools (its tools, tool_choice and parallel_tool_calls), decided
// the same way for gRPC's ChatRequest and OpenAI's JSON: whether the answer's calls are parsed
// out of its text, and whether the output is forced to be calls (forced_tool_calls.h).
#ifndef TANDEM_SERVER_TOOLS_TOOL_USE_H_
#define TANDEM_SERVER_TOOLS_TOOL_USE_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/tools/tool_call_format.h"

namespace tandem::server {

// OpenAI's tool_choice: "auto", "none", "required" or a named function.
enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

struct ToolUse {
  // Tools were given and tool_choice is not "none", so calls are parsed out of the answer in the
  // server's tool-call format (which is not kNone).
  bool parse = false;
  // tool_choice "required" or a named function: the answer must be calls (forced_tool_calls.h).
  bool forced = false;
  std::string only;              // the named function
  bool parallel = true;          // parallel_tool_calls
  nlohmann::ordered_json tools;  // the request's tool list (null when it has none)
};

// `function` (for kFunction) was read from the request's field `function_field`, which errors
// about it name. Without tools, kAuto parses nothing and a forcing choice is refused; with tools
// but no known format (kNone), kAuto leaves the answer text (the model still sees the tools) and
// a forcing choice is refused, pointing at --tool-call-format. INVALID_ARGUMENT naming the
// field otherwise.
absl::StatusOr<ToolUse> ResolveToolUse(ToolChoice choice, const std::string& function,
                                       const std::string& function_field, bool parallel,
                                       nlohmann::ordered_json tools, ToolCallFormat format);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TOOLS_TOOL_USE_H_
