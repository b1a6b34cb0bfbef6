#include "server/grpc/chat_answer.h"

#include <utility>

#include "server/grpc/chat_tool_calls.h"
#include "server/grpc/request_validation.h"

namespace tandem::server {
ChatAnswer::ChatAnswer(std::optional<ReasoningUse> reasoning, ToolCallFormat format,
                       const nlohmann::ordered_json& tools)
    : stream_(AnswerStream::For(reasoning, format, tools)) {}

void ChatAnswer::AddCalls(const std::vector<ToolCall>& calls,
                          google::protobuf::RepeatedPtrField<v1::ToolCall>* out) {
  for (const ToolCall& call : calls) {
    v1::ToolCall* added = out->Add();
    added->set_id(NewToolCallId());
    added->set_name(call.name);
    added->set_arguments(call.arguments);
    added->set_index(calls_++);
  }
}

void ChatAnswer::AddText(std::string_view text, v1::Chunk* chunk) {
  chunk->mutable_text();  // present, if empty, as in every chunk of an answer read whole
  for (const AnswerPiece& piece : stream_.Feed(text)) {
    if (!piece.reasoning.empty()) chunk->mutable_reasoning()->append(piece.reasoning);
    chunk->mutable_text()->append(piece.content);
    AddCalls(piece.calls, chunk->mutable_tool_calls());
  }
}

void ChatAnswer::Finish(v1::Complete* complete) {
  std::vector<AnswerPiece> pieces = stream_.Feed(complete->text());
  for (AnswerPiece& piece : stream_.Finish()) pieces.push_back(std::move(piece));
  complete->set_text("");
  for (const AnswerPiece& piece : pieces) {
    if (!piece.reasoning.empty()) complete->mutable_reasoning()->append(piece.reasoning);
    complete->mutable_text()->append(piece.content);
    AddCalls(piece.calls, complete->mutable_tool_calls());
  }
  if (calls_ > 0 && complete->finish_reason() == v1::STOP) {
    complete->set_finish_reason(v1::TOOL_CALLS);
  }
}

absl::StatusOr<engine::Request> BuildChatCall(const v1::ChatRequest& request, ServiceState& state,
                                              std::unique_ptr<ChatAnswer>* answer) {
  const ToolCallSupport& support = state.tool_calls();
  // The conversation first, so that its errors come first whatever the tools say.
  absl::StatusOr<engine::Request> built = BuildChatRequest(request, state.validation());
  if (!built.ok()) return built.status();
  absl::StatusOr<ToolUse> use =
      ReadChatToolUse(request, support.format(), state.validation().limits.max_request_bytes);
  if (!use.ok()) return use.status();
  if (absl::Status s = support.Apply(*use, state.grammars(), &*built); !s.ok()) return s;
  // After the tools: a forced call's grammar keeps the answer whole.
  const std::optional<ReasoningUse> reasoning = state.reasoning().Apply(&*built);
  if (use->parse || reasoning) {
    *answer = std::make_unique<ChatAnswer>(
        reasoning, use->parse ? support.format() : ToolCallFormat::kNone, use->tools);
  }
  return built;
}

}  // namespace tandem::server
