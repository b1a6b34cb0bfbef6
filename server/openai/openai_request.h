// OpenAI request bodies to the gRPC service's own requests: /v1/chat/completions becomes a
// v1::ChatRequest and /v1/completions a v1::GenerateRequest, which then go through the same
// BuildChatRequest / BuildGenerateRequest (request_validation.h) as gRPC calls. So this file
// checks only what JSON adds: that the body is an object of known parameters with the right
// types. Values are the validation's business (a max_tokens of 10^6 is refused there, with the
// field renamed to the client's: openai_error.h).
//
// Parameters that would change what is generated and that tandem does not do (a suffix, best_of
// with a stream, an unknown response_format type) and parameters it does not know are refused
// with INVALID_ARGUMENT naming them, never ignored. Null counts as
// absent, as OpenAI's SDKs send it.
#ifndef TANDEM_SERVER_OPENAI_OPENAI_REQUEST_H_
#define TANDEM_SERVER_OPENAI_OPENAI_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_use.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

struct OpenAiRequest {
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t n = 1;               // choices, [1, engine::kMaxChoices]
  // Completions' best_of: candidates generated, of which the n with the highest mean token
  // logprob are returned; in [n, engine::kMaxChoices], n when not given (and for chat).
  int32_t best_of = 1;
  // Completions' echo: each choice's text starts with the prompt; with `logprobs`, the prompt's
  // tokens lead the logprobs (generate.sampling.prompt_logprobs is set), and max_tokens may be 0.
  bool echo = false;
  ToolUse tool_use;            // chat only
  // By endpoint: `chat` for chat completions, `generate` for completions.
  v1::ChatRequest chat;
  v1::GenerateRequest generate;
  // Completions given a list of prompts (`prompt_list`, even of one): the second and later, each
  // the same request as `generate` for its own prompt. Only their prompts (text or token_ids)
  // and add_special_tokens are set. Prompt i's choices are numbered from i × n.
  bool prompt_list = false;
  std::vector<v1::GenerateRequest> more_prompts;
};

// The most prompts one completions request may list, and the most choices (prompts × best_of)
// one request may ask for.
inline constexpr int32_t kMaxPromptsPerRequest = 256;
inline constexpr int32_t kMaxChoicesPerRequest = 256;
// A list's prompts may hold this many times the server's --max-prompt-tokens in all.
inline constexpr int32_t kListPromptBudget = 16;

struct OpenAiRequestOptions {
  // The name the server answers to; another `model` is NOT_FOUND.
  std::string model_name;
  // max_tokens when a request gives none: OpenAI's chat has no small default (it generates to
  // the end), so chat gets the server's limit; completions keep OpenAI's documented 16.
  int32_t default_chat_max_tokens = 4096;
  // How the model writes tool calls; kNone: tools go to the template, answers stay text.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
};

absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(absl::string_view body,
                                                         const OpenAiRequestOptions& options);
absl::StatusOr<OpenAiRequest> ParseCompletionRequest(absl::string_view body,
                                                     const OpenAiRequestOptions& options);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_OPENAI_REQUEST_H_
