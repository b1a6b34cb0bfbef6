// Where the next requests of a chat will branch off this one, as prompt token positions for
// engine::Request::checkpoint_hints, so that the prefix cache keeps the model's state there
// (a hybrid model's SSM state cannot be cut out of a longer sequence afterwards):
//   - the end of the rendered prompt, where the answer starts: the next turn repeats this whole
//     prompt, and re-rendering the answer often tokenizes it differently from how it was
//     sampled, so this is where the next turn's match is sure to reach;
//   - the end of the leading system messages: every new session with the same system prompt
//     starts with it;
//   - the end of the messages before the last one: a client that regenerates or edits the last
//     message branches there.
// A boundary counts only when the template renders the shorter conversation as a prefix of the
// full one and its tokens are a prefix of the prompt's (no token straddles the boundary);
// otherwise it is left out. Rendering errors of the shorter conversations are ignored too: the
// hints are an optimisation, never a reason to refuse a chat.
#ifndef TANDEM_SERVER_GRPC_CHAT_CHECKPOINTS_H_
#define TANDEM_SERVER_GRPC_CHAT_CHECKPOINTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "models/tokenizer.h"
#include "server/chat_template/chat_template.h"
#include "server/grpc/chat_variables.h"

namespace tandem::server {

// Tokenizes a rendered chat: no special tokens added (the template placed them), and the
// client's text plain (its special-token spellings stay text; only the template's are markers).
absl::StatusOr<std::vector<int32_t>> EncodeRenderedChat(const models::Tokenizer& tokenizer,
                                                        const chat_template::RenderedPrompt& chat);

// Sorted, unique positions in [1, prompt.size()]. `variables` rendered to `rendered`, which
// tokenized to `prompt`.
std::vector<size_t> ChatCheckpointHints(const ChatTemplate& chat_template,
                                        const models::Tokenizer& tokenizer,
                                        const ChatVariables& variables,
                                        const chat_template::RenderedPrompt& rendered,
                                        const std::vector<int32_t>& prompt);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_CHAT_CHECKPOINTS_H_
