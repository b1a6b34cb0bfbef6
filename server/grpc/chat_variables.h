// The chat template's variables for a ChatRequest, as transformers' apply_chat_template passes
// them: messages (role, content, name, tool_call_id, tool_calls), tools and documents (None when
// absent), the client's chat_template_kwargs, and the server's own add_generation_prompt and
// special tokens. Everything the client wrote is validated here (UTF-8, sizes against the
// request cap, nesting, finite numbers) with errors naming the field as the proto spells it,
// e.g. "tools[0].function.parameters: nested deeper than 32 levels".
#ifndef TANDEM_SERVER_GRPC_CHAT_VARIABLES_H_
#define TANDEM_SERVER_GRPC_CHAT_VARIABLES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "models/tokenizer_config.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

struct ChatVariables {
  // Set by the server: add_generation_prompt, bos_token, eos_token (unk_token, pad_token when
  // the tokenizer has them).
  nlohmann::ordered_json trusted;
  // Written by the client: messages, tools, documents and the kwargs. The renderer marks every
  // string of these untrusted, so their special-token spellings stay text.
  nlohmann::ordered_json untrusted;
};

// Deeper JSON than this in tools, documents, tool calls or kwargs is refused.
inline constexpr int kMaxChatJsonDepth = 32;

// INVALID_ARGUMENT naming the field for bad input; `max_bytes` bounds the text (strings and
// keys) of the whole request.
absl::StatusOr<ChatVariables> BuildChatVariables(const v1::ChatRequest& request,
                                                 const models::TokenizerConfig& tokenizer,
                                                 int64_t max_bytes);

// The request's tools as the template sees them (null when it has none), checked as
// BuildChatVariables checks them: the tool list a request's calls are read and forced by.
absl::StatusOr<nlohmann::ordered_json> ChatToolsJson(const v1::ChatRequest& request,
                                                     int64_t max_bytes);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_CHAT_VARIABLES_H_
