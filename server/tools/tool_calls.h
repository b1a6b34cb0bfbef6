// Tool calls parsed out of a model's output (OpenAI's `tool_calls`), whole or while it streams.
//
// Text outside the format's call blocks (tool_call_format.h) is content, except, once a call has
// been made, whitespace that ends a run of content right before the next call or the end (the
// newlines between blocks). Each block that parses becomes calls, in order; a block that does not
// parse (broken JSON, no name) stays content, so nothing the model wrote is lost. A block cut off
// by the end of the output counts if what it holds parses. The stream holds back only what may
// be the start of a block, and each block until it ends; what it hands out, joined, is what the
// whole parse gives.
#ifndef TANDEM_SERVER_TOOLS_TOOL_CALLS_H_
#define TANDEM_SERVER_TOOLS_TOOL_CALLS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/tools/tool_call_format.h"

namespace tandem::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI's `function.arguments`
};

// What a piece of output holds: content to show, then calls.
struct ToolCallPiece {
  std::string content;
  std::vector<ToolCall> calls;
};

class ToolCallStream {
 public:
  // `tools`: the request's tool list (OpenAI's [{"type": "function", "function": {"name",
  // "parameters"}}]), which kXmlFunction needs to type its parameters' values; may be null.
  ToolCallStream(ToolCallFormat format, nlohmann::json tools);

  // The content and calls `text` completes, in the order the model wrote them: each piece's
  // content came before its calls, and after the previous piece's.
  std::vector<ToolCallPiece> Feed(std::string_view text);
  // Everything still held back, at the end of the output (content or calls, not both).
  ToolCallPiece Finish();

 private:
  // Appends the calls of one block (markers included) to `out`, or the block to its content.
  void TakeBlock(std::string_view block, bool closed, ToolCallPiece* out);
  // After a call, content's trailing whitespace waits for text that is not; it is dropped at the
  // end and by the next call (the newlines between blocks separate them).
  void AddContent(std::string_view text, ToolCallPiece* out);

  const ToolCallFormat format_;
  const nlohmann::json tools_;
  std::string held_;  // text not handed out yet
  bool in_block_ = false;
  size_t scanned_ = 0;      // bytes of held_ already searched for the end marker
  bool called_ = false;     // a call was handed out
  std::string held_space_;  // whitespace after a call
};

// A fresh call id as OpenAI spells them: "call_" and 24 random characters (a conversation only
// needs them distinct).
std::string NewToolCallId();

// The whole output at once.
ToolCallPiece ParseToolCalls(ToolCallFormat format, const nlohmann::json& tools,
                             std::string_view text);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TOOLS_TOOL_CALLS_H_
