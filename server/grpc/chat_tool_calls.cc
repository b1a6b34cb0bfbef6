#include "server/grpc/chat_tool_calls.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/unicode_utf8.h"
#include "server/grpc/chat_variables.h"
#include "server/grpc/request_validation.h"

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

ChatToolCalls::ChatToolCalls(ToolCallFormat format, const nlohmann::ordered_json& tools)
    : stream_(format, tools) {}

void ChatToolCalls::AddCalls(const std::vector<ToolCall>& calls,
                             google::protobuf::RepeatedPtrField<v1::ToolCall>* out) {
  for (const ToolCall& call : calls) {
    v1::ToolCall* added = out->Add();
    added->set_id(NewToolCallId());
    added->set_name(call.name);
    added->set_arguments(call.arguments);
    added->set_index(calls_++);
  }
}

void ChatToolCalls::AddText(std::string_view text, v1::Chunk* chunk) {
  for (const ToolCallPiece& piece : stream_.Feed(text)) {
    chunk->mutable_text()->append(piece.content);
    AddCalls(piece.calls, chunk->mutable_tool_calls());
  }
}

void ChatToolCalls::Finish(v1::Complete* complete) {
  std::vector<ToolCallPiece> pieces = stream_.Feed(complete->text());
  pieces.push_back(stream_.Finish());
  complete->clear_text();
  for (const ToolCallPiece& piece : pieces) {
    complete->mutable_text()->append(piece.content);
    AddCalls(piece.calls, complete->mutable_tool_calls());
  }
  if (calls_ > 0 && complete->finish_reason() == v1::STOP) {
    complete->set_finish_reason(v1::TOOL_CALLS);
  }
}

absl::StatusOr<engine::Request> BuildChatWithTools(const v1::ChatRequest& request,
                                                   ServiceState& state,
                                                   std::unique_ptr<ChatToolCalls>* tool_calls) {
  const ToolCallSupport& support = state.tool_calls();
  // The conversation first, so that its errors come first whatever the tools say.
  absl::StatusOr<engine::Request> built = BuildChatRequest(request, state.validation());
  if (!built.ok()) return built.status();
  absl::StatusOr<ToolUse> use =
      ReadChatToolUse(request, support.format(), state.validation().limits.max_request_bytes);
  if (!use.ok()) return use.status();
  if (absl::Status s = support.Apply(*use, state.grammars(), &*built); !s.ok()) return s;
  if (use->parse) *tool_calls = std::make_unique<ChatToolCalls>(support.format(), use->tools);
  return built;
}

}  // namespace tandem::server
