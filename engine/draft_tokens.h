// Drafts for speculative decoding, without a draft model: the tokens most likely to come next
// are copied from text the sequence has already seen (prompt lookup) or from the output the
// client expects (a prediction: OpenAI's "predicted outputs"). Code edits, quotes from a
// retrieved document, JSON that repeats keys, a rewrite of the prompt: much of what a server
// writes is already in front of it.
//
// The draft continues the place in that text whose preceding tokens match the end of the
// sequence the longest. The prediction is searched as the expected sequence, prompt then
// prediction, so the first step drafts the prediction's start (the whole prompt precedes it),
// and after the output departs from it the draft resumes wherever the latest tokens reappear.
// Drafting is pure guessing: the scheduler verifies every drafted token against the model
// (engine/scheduler.h), so a bad draft costs compute, never correctness.
#ifndef TANDEM_ENGINE_DRAFT_TOKENS_H_
#define TANDEM_ENGINE_DRAFT_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tandem::engine {

struct DraftOptions {
  int32_t max_tokens = 4;  // the longest draft
  // A place is followed only when at least this many tokens before it match the end of the
  // sequence: one token in common says little about what comes next.
  int32_t min_match = 2;
  // Matches are compared up to this many tokens back (longer ones count as equally good).
  int32_t max_match = 64;
  bool prompt_lookup = true;  // also search the sequence itself, not only the prediction
};

// Where a draft came from: a place in the sequence itself, or in the expected sequence (the
// prompt's positions, then the prediction's), whose tokens from `at` on are the draft.
struct DraftPlace {
  bool in_prediction = false;
  size_t at = 0;
};

// Replaces `draft` with up to options.max_tokens tokens to follow `tokens` (prompt, then the
// output so far; its first `prompt_tokens` are the prompt) and returns where they came from
// (nothing when the draft is empty). `prediction` may be empty. Equal matches prefer the
// prediction; among its places the one nearest `prediction_hint` (a position in the expected
// sequence: where the previous draft from it would continue; 0 for none), else the latest, as
// in the sequence itself. The hint keeps a prediction that repeats a long passage aligned.
std::optional<DraftPlace> ProposeDraft(std::span<const int32_t> tokens, size_t prompt_tokens,
                                       std::span<const int32_t> prediction,
                                       const DraftOptions& options, std::vector<int32_t>* draft,
                                       size_t prediction_hint = 0);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_DRAFT_TOKENS_H_
