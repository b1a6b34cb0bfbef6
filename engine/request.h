// What a client asks the engine for, and the events it gets back on the request's stream.
#ifndef TANDEM_ENGINE_REQUEST_H_
#define TANDEM_ENGINE_REQUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/grammar.h"
#include "engine/sampler.h"

namespace tandem::engine {

using RequestId = uint64_t;

// A reasoning block's markers as the ids of the single tokens they are (-1: the marker is not
// one token), and whether the prompt opened the block (it ends with the start marker).
struct ReasoningBlock {
  int32_t start_token = -1;
  int32_t end_token = -1;
  bool opened = false;
};

struct Request {
  std::vector<int32_t> prompt;  // token ids, already tokenized (chat template applied)
  SamplingParams sampling;
  // 0 only with prompt_logprobs: the request scores the prompt and generates nothing.
  int32_t max_new_tokens = 16;
  std::vector<int32_t> stop_token_ids;    // generation ends after emitting one of these
  std::vector<std::string> stop_strings;  // ends before the text of the first match
  bool ignore_eos = false;                // keep going past the model's end-of-sequence ids
  int32_t top_logprobs = 0;               // return the n most likely tokens with each token (0..20)
  bool skip_special_tokens = true;        // in text deltas
  // Special tokens written in the text even with skip_special_tokens: markup the client parses
  // out of it, such as a tool-call format's markers.
  std::vector<int32_t> shown_special_tokens;
  // A reasoning model's answer: its reasoning block's markers as token ids, to count the block's
  // tokens (Usage::reasoning_tokens; reasoning_tokens.h says how). The server sets it for a
  // chat whose answer it splits into reasoning and content.
  std::optional<ReasoningBlock> reasoning_block;
  // Structured output: when set, every token is chosen among those that keep the output text a
  // prefix of a sentence of this grammar (engine/json_schema_grammar.h builds it from a JSON
  // Schema), and the end-of-sequence ids are allowed only where the text is a whole sentence.
  // Needs the engine's tokenizer. When the text is whole and nothing may follow, the request ends
  // there (FinishReason::kStop), ignore_eos or not.
  std::shared_ptr<const Grammar> grammar;
  std::string client_id;                  // echoed in logs; free-form
  // Prompt positions where later requests are expected to branch off this one's prompt, such
  // as the end of a chat's system prompt and the end of the rendered conversation (where the
  // answer starts, which the next turn's prompt continues past). With a prefix cache on a
  // model with SSM layers, prefill saves the state at each and the cache keeps it, so the
  // first later request that shares the prefix up to a hint already restores from there.
  // Ascending, no duplicates, each in [1, prompt.size()], at most kMaxCheckpointHints. A hint
  // is advice: one the tree already has a state for, or one there is no memory for, is skipped.
  // Each kept hint costs an SSM block (on a full cache, the least valuable cached state), so
  // name only where a later request is likely to branch, not every message boundary.
  std::vector<size_t> checkpoint_hints;
  // The output the client expects, or most of it (OpenAI's "predicted outputs"): a file being
  // edited, a document being rewritten. With speculative decoding on, the engine drafts from it
  // (engine/draft_tokens.h) and verifies the drafts against the model, so the output is the
  // same as without it, only sooner where they agree. At most kMaxPredictionTokens ids.
  std::vector<int32_t> prediction;
  // Prompt logprobs (OpenAI's `echo` with `logprobs`; how evaluation harnesses score a text):
  // when set, each prompt token after the first gets its logprob given the tokens before it, and
  // the *prompt_logprobs (0..20) most likely tokens at its position, all of the raw logits. Every
  // prompt position then needs its row of logits, so the prefix cache restores none of the
  // prompt for this request (it still keeps the request's state for later ones), and prefill
  // chunks of such requests share a step's SchedulerConfig::prompt_logprob_rows.
  std::optional<int32_t> prompt_logprobs;
  // Pins the prompt in the prefix cache (Prompt Cache's reusable prompt modules, as prefixes):
  // the request prefills it, generates nothing (max_new_tokens must be 0), and keeps its KV and
  // final SSM state in the cache, where eviction never takes them until Engine::UnpinPrefix, so
  // every later prompt that starts with these tokens restores them. Needs a prefix cache; the
  // pinned prefixes together may hold at most SchedulerConfig::max_pinned_bytes. The finished
  // event names the pin (Event::pinned_prefix), or says why there is none (kError).
  bool pin_prefix = false;
};

inline constexpr size_t kMaxPredictionTokens = 32768;

// Engine::SubmitChoices: the most answers one prompt may ask for at once (OpenAI's `n`).
inline constexpr int32_t kMaxChoices = 64;

inline constexpr size_t kMaxCheckpointHints = 16;

enum class FinishReason {
  kLength,     // max_new_tokens reached
  kStop,       // a stop token id, an end-of-sequence id or a stop string
  kCancelled,  // Cancel() or engine shutdown
  kError,      // the request failed; see Event::error
};
const char* FinishReasonName(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens restored from the prefix cache
  int64_t completion_tokens = 0;
  int32_t preemptions = 0;  // times the request was evicted from the batch and resumed
  // Speculative decoding: drafted tokens the model confirmed (each also counts in
  // completion_tokens) and those it did not (computed, then dropped).
  int64_t accepted_draft_tokens = 0;
  int64_t rejected_draft_tokens = 0;
  // Of completion_tokens, those of the answer's reasoning block (Request::reasoning_block): 0
  // without one; nullopt where its markers are not single tokens, so the block's tokens are not
  // known.
  std::optional<int64_t> reasoning_tokens = 0;
};

// Seconds, measured from Submit().
struct Timings {
  double queued = 0;            // until first admitted to the batch
  double first_token = 0;       // until the first output token was sampled
  double finished = 0;          // until the request finished
  double mean_inter_token = 0;  // average gap between output tokens after the first
};

struct Event {
  enum class Kind { kTokens, kFinished } kind = Kind::kTokens;
  RequestId id = 0;
  double seconds = 0;  // since Submit(), when the engine emitted this event
  // kTokens: the new token ids and the text they complete (UTF-8; may be empty while a code
  // point or a possible stop string is incomplete).
  std::vector<int32_t> tokens;
  std::string text;
  // Per token, when sampling.logprobs: the chosen token's logprob first, then the
  // sampling.top_logprobs most likely tokens (log_softmax of the raw logits).
  std::vector<std::vector<TopLogprob>> logprobs;
  // With Request::prompt_logprobs, on the request's first event (its first token's, or the
  // finished event when it generates none): entry i is prompt token i + 1's, laid out as
  // `logprobs` (that token and its logprob, then the most likely tokens at its position).
  std::vector<std::vector<TopLogprob>> prompt_logprobs;
  // kFinished:
  FinishReason finish_reason = FinishReason::kLength;
  std::string stop_string;  // the stop string that matched, if any
  // kFinished also carries `text`: whatever was held back until the end.
  absl::Status error;  // kError: why
  Usage usage;
  Timings timings;
  // A Request::pin_prefix request's pin, for Engine::UnpinPrefix.
  std::optional<uint64_t> pinned_prefix;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_REQUEST_H_
