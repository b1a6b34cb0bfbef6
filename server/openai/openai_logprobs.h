// OpenAI's `logprobs` objects from the engine's per-token log-probabilities (engine::Event's
// `logprobs`: the chosen token first, then the most likely ones). Chat completions list one
// entry per token, {"token", "logprob", "bytes", "top_logprobs": [...]}; text completions keep
// four parallel lists, "tokens", "token_logprobs", "top_logprobs" (token -> logprob maps, the
// chosen token always among them, as OpenAI's legacy API has it) and "text_offset".
//
// A token's "token" is its text as it would decode mid-output: a token that ends inside a
// UTF-8 character shows U+FFFD there, and "bytes" holds its exact bytes. Without a tokenizer
// tokens are spelled "token_id:N", as vLLM spells them.
#ifndef TANDEM_SERVER_OPENAI_OPENAI_LOGPROBS_H_
#define TANDEM_SERVER_OPENAI_OPENAI_LOGPROBS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"
#include "models/tokenizer.h"
#include "nlohmann/json.hpp"

namespace tandem::server {

// The logprobs of one answer, or of one streamed chunk, built event by event.
class OpenAiLogprobs {
 public:
  // `tokenizer` may be null; it must outlive this. `skip_special_tokens`: the text leaves special
  // tokens out, so a completion's text offsets do not count them.
  OpenAiLogprobs(bool chat, const models::Tokenizer* tokenizer, bool skip_special_tokens = true);

  // The event's tokens and their logprobs (an event without logprobs adds nothing).
  void Add(const engine::Event& event);
  // Completions' echo: the prompt's tokens before the answer's, the first without a logprob (null,
  // as OpenAI writes it: nothing precedes it), the others with `scored` (engine::Event's
  // prompt_logprobs: entry i is prompt token i + 1's).
  void AddPrompt(std::span<const int32_t> prompt,
                 const std::vector<std::vector<engine::TopLogprob>>& scored);
  bool empty() const { return count_ == 0; }
  // The choice's "logprobs" member for what was added since the last Take, which starts anew
  // (a stream sends each chunk's own). Continues the text offsets of a completion.
  nlohmann::json Take();

 private:
  // One token: `at` holds its logprob and the most likely tokens', or is null (a prompt's first
  // token). `starts_text`: a prompt's token, which, until the text has begun (special tokens
  // skipped), counts what it decodes to alone: a tokenizer may drop what the token spells at
  // the start of a text (SentencePiece's leading space).
  void AddToken(int32_t id, const std::vector<engine::TopLogprob>* at, bool starts_text = false);

  const bool chat_;
  const models::Tokenizer* const tokenizer_;
  const bool skip_special_tokens_;
  int64_t count_ = 0;
  int64_t text_offset_ = 0;    // characters the tokens so far make (completions)
  std::string pending_bytes_;  // the start of a character the next token completes
  nlohmann::json entries_;   // chat: the "content" list
  nlohmann::json tokens_, token_logprobs_, top_logprobs_, text_offsets_;  // completions
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_OPENAI_LOGPROBS_H_
