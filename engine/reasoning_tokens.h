// How many of a reasoning model's output tokens are its reasoning (OpenAI's
// usage.completion_tokens_details.reasoning_tokens), counted on token ids, as the block is split
// from the answer's text (server/reasoning/reasoning_stream.h):
//  - after a prompt that opened the block, the output starts inside it; otherwise a block counts
//    only where the output's first token is the start marker (the text split also lets
//    whitespace come first; a token-level count does not see whitespace, and models write the
//    marker first);
//  - the block runs through the first end marker, which counts as reasoning;
//  - an output cut off inside the block is all reasoning.
// Unknown (nullopt) when a marker the output needs is not a single token (-1): the end marker
// wherever a block runs, the start marker where the prompt did not open one. Its place then falls
// inside a token, or across several.
#ifndef TANDEM_ENGINE_REASONING_TOKENS_H_
#define TANDEM_ENGINE_REASONING_TOKENS_H_

#include <cstdint>
#include <optional>
#include <span>

#include "engine/request.h"

namespace tandem::engine {

std::optional<int64_t> CountReasoningTokens(const ReasoningBlock& block,
                                            std::span<const int32_t> output);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_REASONING_TOKENS_H_
