// The server's side of tool calls, fixed when it starts: the format its model writes calls in
// (the one configured, else the one its chat template shows), and what a request that uses
// tools needs besides its prompt: the format's markers kept in the output text, and, for a
// forced choice, the grammar of its calls. Shared by gRPC's Chat and OpenAI's chat completions.
#ifndef TANDEM_SERVER_TOOLS_TOOL_CALL_SUPPORT_H_
#define TANDEM_SERVER_TOOLS_TOOL_CALL_SUPPORT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "engine/grammar_cache.h"
#include "engine/request.h"
#include "models/tokenizer.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_use.h"

namespace tandem::server {

class ToolCallSupport {
 public:
  // `tokenizer` may be null (no calls are read then).
  ToolCallSupport(const models::Tokenizer* tokenizer, std::optional<ToolCallFormat> configured);

  ToolCallFormat format() const { return format_; }
  // Whether the format was configured (--tool-call-format) rather than detected.
  bool configured() const { return configured_; }

  // Prepares `request` for an answer whose calls are parsed: the format's markers that are
  // special tokens stay in its text, and a forced choice constrains it to calls (the grammar
  // compiled once per tool list in `grammars`). INVALID_ARGUMENT naming the tool when its calls
  // cannot be enforced.
  absl::Status Apply(const ToolUse& use, engine::GrammarCache& grammars,
                     engine::Request* request) const;

 private:
  const bool has_tokenizer_;
  const bool configured_;
  const ToolCallFormat format_;
  // The markers that are special tokens: skip_special_tokens would drop them from the text, and
  // the calls with them.
  std::vector<int32_t> special_markers_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TOOLS_TOOL_CALL_SUPPORT_H_
