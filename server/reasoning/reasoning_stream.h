// A model's output split into its reasoning and its answer (OpenAI's reasoning_content and
// content), whole or while it streams, in a format of reasoning_format.h:
//  - After a prompt that ends with the start marker (`opened`: the template opened the block),
//    the output starts inside the block; a start marker the model repeats there (leading
//    whitespace aside) is dropped with that whitespace.
//  - Otherwise a block counts only at the very start of the output (leading whitespace aside);
//    an output that starts otherwise is all answer, markers and all.
//  - The block ends at the first end marker. The whitespace right after it is dropped (models
//    write "</think>\n\n"); the rest is the answer, whatever markers it holds. The reasoning is
//    the block's text as written, its newlines included.
//  - An output that ends inside the block (cut off by the length limit) is all reasoning.
// The stream holds back only what may be the start of a marker (or the whitespace before one at
// the start); what it hands out, joined, is what the whole split gives.
#ifndef TANDEM_SERVER_REASONING_REASONING_STREAM_H_
#define TANDEM_SERVER_REASONING_REASONING_STREAM_H_

#include <string>
#include <string_view>

#include "server/reasoning/reasoning_format.h"

namespace tandem::server {

// What a piece of output holds: reasoning, then answer text.
struct ReasoningPiece {
  std::string reasoning;
  std::string content;
};

class ReasoningStream {
 public:
  ReasoningStream(ReasoningFormat format, bool opened);

  // The reasoning and the answer text that `text` completes.
  ReasoningPiece Feed(std::string_view text);
  // Everything still held back, at the end of the output.
  ReasoningPiece Finish();
  // Whether the output had a reasoning block (the prompt opened one, or the output began with
  // one): its reasoning is then a text, possibly empty, rather than absent.
  bool reasoned() const { return reasoned_; }

 private:
  // kOpenedStart: inside a block the prompt opened, where a repeated start marker may come.
  enum class Where { kStart, kOpenedStart, kInside, kAfterEnd, kAnswer };

  const ReasoningMarkers markers_;
  Where where_;
  bool reasoned_;
  std::string held_;  // text not handed out yet
};

// The whole output at once.
ReasoningPiece SplitReasoning(ReasoningFormat format, bool opened, std::string_view text);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_REASONING_REASONING_STREAM_H_
