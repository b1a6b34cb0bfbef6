// Engine events in, API messages out: a run of token events becomes one Chunk (a slow reader
// gets the tokens that piled up in one message instead of one message per token), the finished
// event becomes Complete, or Error when the engine failed the request.
#ifndef TANDEM_SERVER_GRPC_EVENT_CONVERSION_H_
#define TANDEM_SERVER_GRPC_EVENT_CONVERSION_H_

#include <span>

#include "absl/status/status.h"
#include "engine/request.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

// Appends a kTokens event's tokens, logprobs, prompt logprobs and (`with_text`) text to `chunk`.
void AppendTokens(const engine::Event& event, v1::Chunk* chunk, bool with_text = true);
// Appends only the event's prompt logprobs (a finished event carries them when the request
// generated nothing).
void AppendPromptLogprobs(const engine::Event& event, v1::Chunk* chunk);

// How a kFinished event ends the call: OK, or the engine's error (INTERNAL when it named none).
absl::Status FinishStatus(const engine::Event& finished);

// The usage of one request's choices (`finished`: their finish events, in choice order): each
// prompt once, as its first choice saw it (the others restore what it prefilled, so their cached
// tokens would count the prompt again), and the sum of what the choices generated. A request of
// several prompts has `choices_per_prompt` choices for each, in prompt order (0: one prompt).
engine::Usage ChoicesUsage(std::span<const engine::Event> finished, size_t choices_per_prompt = 0);

// Fills `response` from a kFinished event. `last_token` is the request's last output token
// (-1 when none): a stop without a stop string was that token. Returns the status the call ends
// with: OK, or the engine's error (then `response` holds an Error).
absl::Status FinishedResponse(const engine::Event& event, int32_t last_token,
                              v1::GenerateResponse* response);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_EVENT_CONVERSION_H_
