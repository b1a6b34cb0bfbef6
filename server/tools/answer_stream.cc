#include "server/tools/answer_stream.h"

#include <utility>

namespace tandem::server {

AnswerStream AnswerStream::For(const std::optional<ReasoningUse>& reasoning, ToolCallFormat format,
                               const nlohmann::json& tools) {
  std::optional<ReasoningStream> split;
  if (reasoning) split.emplace(reasoning->format, reasoning->opened);
  std::optional<ToolCallStream> calls;
  if (format != ToolCallFormat::kNone) calls.emplace(format, tools);
  return AnswerStream(std::move(split), std::move(calls));
}

void AnswerStream::Add(ReasoningPiece split, bool final, std::vector<AnswerPiece>* out) {
  if (!split.reasoning.empty()) out->push_back(AnswerPiece{std::move(split.reasoning), "", {}});
  if (!tool_calls_) {
    if (!split.content.empty()) out->push_back(AnswerPiece{"", std::move(split.content), {}});
    return;
  }
  std::vector<ToolCallPiece> pieces = tool_calls_->Feed(split.content);
  if (final) pieces.push_back(tool_calls_->Finish());
  for (ToolCallPiece& piece : pieces) {
    if (piece.content.empty() && piece.calls.empty()) continue;
    out->push_back(AnswerPiece{"", std::move(piece.content), std::move(piece.calls)});
  }
}

std::vector<AnswerPiece> AnswerStream::Feed(std::string_view text) {
  std::vector<AnswerPiece> out;
  Add(reasoning_ ? reasoning_->Feed(text) : ReasoningPiece{"", std::string(text)},
      /*final=*/false, &out);
  return out;
}

std::vector<AnswerPiece> AnswerStream::Finish() {
  std::vector<AnswerPiece> out;
  Add(reasoning_ ? reasoning_->Finish() : ReasoningPiece{}, /*final=*/true, &out);
  return out;
}

AnswerPiece ParseAnswer(AnswerStream stream, std::string_view text, bool* reasoned) {
  std::vector<AnswerPiece> pieces = stream.Feed(text);
  for (AnswerPiece& piece : stream.Finish()) pieces.push_back(std::move(piece));
  AnswerPiece whole;
  for (AnswerPiece& piece : pieces) {
    whole.reasoning += piece.reasoning;
    whole.content += piece.content;
    for (ToolCall& call : piece.calls) whole.calls.push_back(std::move(call));
  }
  if (reasoned != nullptr) *reasoned = stream.reasoned();
  return whole;
}

}  // namespace tandem::server
