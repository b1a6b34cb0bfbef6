// The server's side of reasoning, fixed when it starts: the format its model writes reasoning in
// (the one configured, else the one its chat template shows), and what a chat whose answer is
// split needs: its markers kept in the output text where they are special tokens, and whether
// its prompt opened the block. Shared by gRPC's Chat and OpenAI's chat completions.
#ifndef TANDEM_SERVER_REASONING_REASONING_SUPPORT_H_
#define TANDEM_SERVER_REASONING_REASONING_SUPPORT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/request.h"
#include "models/tokenizer.h"
#include "server/reasoning/reasoning_format.h"

namespace tandem::server {

// How one answer is split (reasoning_stream.h).
struct ReasoningUse {
  ReasoningFormat format = ReasoningFormat::kNone;
  bool opened = false;  // the prompt ends with the start marker
};

class ReasoningSupport {
 public:
  // `tokenizer` may be null (no answer is split then).
  ReasoningSupport(const models::Tokenizer* tokenizer, std::optional<ReasoningFormat> configured);

  ReasoningFormat format() const { return format_; }
  // Whether the format was configured (--reasoning-format) rather than detected.
  bool configured() const { return configured_; }

  // How the answer of `request`, a chat's (its prompt rendered), is split: nullopt when it is
  // not, without a format or a tokenizer, or when a grammar constrains the output (structured
  // output, forced tool calls: the answer is the constrained text whole). Otherwise the markers
  // that are special tokens are added to the request's shown ones, and the request carries the
  // block's markers as token ids, for the engine to count its tokens (Usage::reasoning_tokens).
  std::optional<ReasoningUse> Apply(engine::Request* request) const;

 private:
  const models::Tokenizer* tokenizer_;
  const bool configured_;
  const ReasoningFormat format_;
  // The markers that are special tokens: skip_special_tokens would drop them from the text.
  std::vector<int32_t> special_markers_;
  // The markers as the single tokens they are, if they are (not `opened`: that is per request).
  engine::ReasoningBlock marker_tokens_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_REASONING_REASONING_SUPPORT_H_
