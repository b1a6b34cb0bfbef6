// A chat answer read whole or as it streams: its reasoning first (server/reasoning), then its
// content, with the tool calls parsed out of the content alone (tool_calls.h): a call the model
// only reasons about is not made. Either part may be off, and with both off the answer is its
// text. What the stream hands out, joined, is what the whole parse gives.
#ifndef TANDEM_SERVER_TOOLS_ANSWER_STREAM_H_
#define TANDEM_SERVER_TOOLS_ANSWER_STREAM_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/reasoning/reasoning_stream.h"
#include "server/reasoning/reasoning_support.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_calls.h"

namespace tandem::server {

// What a piece of the answer holds, in this order: reasoning, content, calls.
struct AnswerPiece {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
};

class AnswerStream {
 public:
  // Null parts are off.
  AnswerStream(std::optional<ReasoningStream> reasoning, std::optional<ToolCallStream> tool_calls)
      : reasoning_(std::move(reasoning)), tool_calls_(std::move(tool_calls)) {}
  // A request's reader: reasoning split as `reasoning` says (nullopt: not split), calls parsed
  // in `format` (kNone: not parsed), typed by the request's `tools`.
  static AnswerStream For(const std::optional<ReasoningUse>& reasoning, ToolCallFormat format,
                          const nlohmann::json& tools);

  // The pieces `text` completes, in the order the model wrote them.
  std::vector<AnswerPiece> Feed(std::string_view text);
  // Everything still held back, at the end of the output.
  std::vector<AnswerPiece> Finish();

  bool splits_reasoning() const { return reasoning_.has_value(); }
  // Whether the answer had a reasoning block (ReasoningStream::reasoned).
  bool reasoned() const { return reasoning_ && reasoning_->reasoned(); }

 private:
  // The pieces of a split: its reasoning, then its content read for calls.
  void Add(ReasoningPiece split, bool final, std::vector<AnswerPiece>* out);

  std::optional<ReasoningStream> reasoning_;
  std::optional<ToolCallStream> tool_calls_;
};

// The whole answer at once, in one piece. `reasoned` (may be null): whether it had a reasoning
// block.
AnswerPiece ParseAnswer(AnswerStream stream, std::string_view text, bool* reasoned);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TOOLS_ANSWER_STREAM_H_
