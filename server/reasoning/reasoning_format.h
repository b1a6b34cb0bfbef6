// How a reasoning model sets its reasoning apart from its answer, which is fixed by the chat
// template it was trained with. DeepSeek-R1, Qwen3, Nemotron Nano 2 and Nemotron 3 write
//
//   <think>
//   the reasoning
//   </think>
//
//   the answer
//
// and templates that turn reasoning on often write the opening marker themselves, at the end of
// the prompt, so that the output starts inside the block (reasoning_stream.h).
//
//   kThink  <think> … </think>
//   kNone   nothing is split off: the answer is the whole output
#ifndef TANDEM_SERVER_REASONING_REASONING_FORMAT_H_
#define TANDEM_SERVER_REASONING_REASONING_FORMAT_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace tandem::server {

enum class ReasoningFormat { kNone, kThink };

// The markers around the reasoning; empty for kNone.
struct ReasoningMarkers {
  std::string_view start;
  std::string_view end;
};
ReasoningMarkers ReasoningMarkersOf(ReasoningFormat format);

// The format a chat template's own text shows: kThink when it writes or strips the end marker
// (templates of reasoning models drop past turns' reasoning by it). kNone when it shows none (or
// there is no template).
ReasoningFormat DetectReasoningFormat(std::string_view chat_template);

// "none", "think".
std::string_view ReasoningFormatName(ReasoningFormat format);
// A name as ReasoningFormatName writes it; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<ReasoningFormat> ParseReasoningFormat(std::string_view name);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_REASONING_REASONING_FORMAT_H_
