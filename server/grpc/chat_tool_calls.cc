#include "server/grpc/chat_tool_calls.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/unicode_utf8.h"
#include "server/grpc/chat_variables.h"

namespace tandem::server {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

}  // namespace

absl::StatusOr<ToolUse> ReadChatToolUse(const v1::ChatRequest& request, ToolCallFormat format,
                                        int64_t max_bytes) {
  ToolChoice choice = ToolChoice::kAuto;
  std::string function;
  const v1::ToolChoice& asked = request.tool_choice();
  // A mode this server does not know arrives as an unknown field (proto2's enums are closed):
  // refused rather than read as AUTO.
  if (!asked.unknown_fields().empty()) {
    return Invalid("tool_choice", "holds a field or mode value this server does not know");
  }
  switch (asked.choice_case()) {
    case v1::ToolChoice::kMode:
      switch (asked.mode()) {
        case v1::ToolChoice::AUTO:
          break;
        case v1::ToolChoice::NONE:
          choice = ToolChoice::kNone;
          break;
        case v1::ToolChoice::REQUIRED:
          choice = ToolChoice::kRequired;
          break;
        default:
          return Invalid("tool_choice.mode", absl::StrCat("unknown value ", asked.mode()));
      }
      break;
    case v1::ToolChoice::kFunction:
      choice = ToolChoice::kFunction;
      function = asked.function();
      if (!models::IsValidUtf8(function)) return Invalid("tool_choice.function", "not valid UTF-8");
      break;
    default:  // no tool_choice, or one that chose nothing: AUTO
      break;
  }
  absl::StatusOr<nlohmann::ordered_json> tools = ChatToolsJson(request, max_bytes);
  if (!tools.ok()) return tools.status();
  absl::StatusOr<ToolUse> use =
      ResolveToolUse(choice, function, "tool_choice.function", request.parallel_tool_calls(),
                     *std::move(tools), format);
  if (!use.ok()) return use.status();
  const v1::SamplingParams& sampling = request.sampling();
  if (use->forced &&
      sampling.response_format_case() != v1::SamplingParams::RESPONSE_FORMAT_NOT_SET) {
    return Invalid(sampling.has_json_schema() ? "sampling.json_schema" : "sampling.json_object",
                   "cannot be combined with a tool_choice that forces tool calls");
  }
  return use;
}

}  // namespace tandem::server
