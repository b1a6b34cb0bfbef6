// OpenAI's response objects from engine events: chat.completion and text_completion for whole
// answers, chat.completion.chunk and text_completion chunks for streams (the chat stream opens
// with the assistant's role, and the last chunk carries the finish_reason), and usage with
// prompt_tokens_details.cached_tokens from the prefix cache.
#ifndef TANDEM_SERVER_OPENAI_OPENAI_RESPONSE_H_
#define TANDEM_SERVER_OPENAI_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "models/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/reasoning/reasoning_support.h"
#include "server/tools/answer_stream.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_calls.h"

namespace tandem::server {

// What every object of one response shares.
struct CompletionShape {
  bool chat = true;  // chat completion, else text completion
  std::string id;    // "chatcmpl-<request id>" or "cmpl-<request id>"
  std::string model;
  int64_t created = 0;           // Unix seconds
  bool usage_in_chunks = false;  // stream_options.include_usage: chunks carry "usage": null
  bool logprobs = false;         // choices carry logprobs (openai_logprobs.h)
  bool skip_special_tokens = true;  // the request's: special tokens are not in the text
  const models::Tokenizer* tokenizer = nullptr;  // spells the logprobs' tokens; may be null
  // Chat: tool calls are parsed out of the text (tool_calls.h) in this format; kNone: the text
  // is the answer.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
  nlohmann::json tools;  // the request's, which the parse reads parameter types from
  // Chat: how the reasoning is split off the answer (reasoning_content); nullopt: it is not.
  std::optional<ReasoningUse> reasoning;
  // Completions of several prompts: the choices generated for each, prompt by prompt (choice c
  // answers prompt c / choices_per_prompt).
  int32_t choices_per_prompt = 1;
  // best_of: of each prompt's choices, the answer keeps this many, those with the highest mean
  // token logprob, best first; 0 keeps all in order.
  int32_t keep_best = 0;
  // Completions' echo: every choice's text starts with its prompt's text, and with logprobs its
  // logprobs start with the prompt's tokens (OpenAiLogprobs::AddPrompt). One per prompt.
  struct EchoedPrompt {
    std::string text;
    std::vector<int32_t> tokens;
  };
  bool echo = false;
  std::vector<EchoedPrompt> prompts;
  const EchoedPrompt& prompt_of(size_t choice) const {
    return prompts[choice / static_cast<size_t>(choices_per_prompt)];
  }
};

// A fresh reader of one choice's answer: reasoning and calls as the shape says (both off for
// text completions).
AnswerStream NewAnswerStream(const CompletionShape& shape);

// "stop" or "length"; "abort" when the request was aborted (the server shutting down, or the
// gRPC Abort call), as vLLM says it.
const char* OpenAiFinishReason(engine::FinishReason reason);

// Choice `index` of a whole answer: `text` is everything it generated, `finished` the engine's
// finish event, `logprobs` the choice's (null when not asked for). With a tool-call format the
// message holds the calls found in the text (content null when nothing else), and finish_reason
// says "tool_calls" when the model stopped after making some. With a reasoning split the message
// has reasoning_content: the reasoning's text, or null when the answer had no reasoning block.
nlohmann::json ChoiceJson(const CompletionShape& shape, int index, const std::string& text,
                          const engine::Event& finished, nlohmann::json logprobs);
// The whole answer: its choices (ChoiceJson, in index order) and their usage.
nlohmann::json CompletionJson(const CompletionShape& shape, nlohmann::json choices,
                              const engine::Usage& usage);
// A chunk of a stream with choice `index`'s new text (`role`: the chat stream's first chunk
// names the role) and the logprobs of its tokens, or with its finish reason and no text. A chat's
// new `reasoning` goes to delta.reasoning_content, before the text.
nlohmann::json ChunkJson(const CompletionShape& shape, int index, const std::string& text,
                         bool role, const char* finish_reason, nlohmann::json logprobs = nullptr,
                         const std::string& reasoning = "");
// A chunk with choice `index`'s tool calls, whole (name and arguments at once); `first_index`
// numbers the first among the choice's calls.
nlohmann::json ToolCallChunkJson(const CompletionShape& shape, int index,
                                 const std::vector<ToolCall>& calls, int first_index);
// The finish_reason of a chat answer that made `calls` tool calls.
const char* ChatFinishReason(engine::FinishReason reason, size_t calls);

// The stream's last chunk when include_usage was asked for: no choices, the usage.
nlohmann::json UsageChunkJson(const CompletionShape& shape, const engine::Usage& usage);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_OPENAI_RESPONSE_H_
