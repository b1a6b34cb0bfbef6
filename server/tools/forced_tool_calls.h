// tool_choice "required", or a named function: the answer must be tool calls, written in the
// model's format (tool_call_format.h), each naming one of the request's tools (or the named one)
// with arguments its `parameters` schema admits. Built as a structured-output grammar
// (engine/json_schema_grammar.h), so it holds for every sampled token; the parameters' schemas
// must use the keywords structured output enforces (docs/STRUCTURED_OUTPUT.md).
#ifndef TANDEM_SERVER_TOOLS_FORCED_TOOL_CALLS_H_
#define TANDEM_SERVER_TOOLS_FORCED_TOOL_CALLS_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/grammar.h"
#include "nlohmann/json.hpp"
#include "server/tools/tool_call_format.h"

namespace tandem::server {

// `tools`: OpenAI's tool list, in the order the client sent it (each {"type": "function",
// "function": {"name", "parameters"}}). `only`: the one function allowed, or empty for any.
// `parallel`: several calls allowed, else exactly one. INVALID_ARGUMENT naming the tool
// (tools[i].function...) or tool_choice when the calls cannot be enforced.
absl::StatusOr<engine::Grammar> ForcedToolCallGrammar(ToolCallFormat format,
                                                      const nlohmann::ordered_json& tools,
                                                      const std::string& only, bool parallel);

// What ForcedToolCallGrammar's result depends on, as a key for engine::GrammarCache.
std::string ForcedToolCallKey(ToolCallFormat format, const nlohmann::ordered_json& tools,
                              const std::string& only, bool parallel);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TOOLS_FORCED_TOOL_CALLS_H_
