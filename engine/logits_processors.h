// The pieces of sampling that rewrite or read a row of logits, kept apart from the sampler so
// that each rule can be tested on hand-made numbers:
//   TokenCounts      which tokens a sequence has seen (prompt) and generated, and how often;
//   AppendPenaltyTokens  the tokens repetition (Hugging Face), presence and frequency (OpenAI /
//                    vLLM) apply to, as kernels::RowSampler takes them;
//   ComputeLogprobs  log-softmax of a row for the chosen token and the n most likely tokens
//                    (kernels/logprobs.h, where every backend's sampling read-back finds it).
#ifndef TANDEM_ENGINE_LOGITS_PROCESSORS_H_
#define TANDEM_ENGINE_LOGITS_PROCESSORS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/logprobs.h"
#include "kernels/sampling_row.h"

namespace tandem::engine {

// Token occurrence counts of one sequence. Memory and the per-step cost of the penalties grow
// with the number of distinct tokens seen, never with the vocabulary: a vocabulary-sized array
// per sequence would cost megabytes per request and an O(vocab) pass per step.
// Open addressing over a power-of-two table; nothing is allocated while the distinct count stays
// within what Reserve() was given.
class TokenCounts {
 public:
  struct Entry {
    int32_t token;
    int32_t generated;  // occurrences among generated tokens
    bool in_prompt;
  };

  TokenCounts() = default;
  void Reserve(size_t distinct_tokens);
  void AddPrompt(int32_t token);
  void AddGenerated(int32_t token);

  // Distinct tokens, in order of first appearance.
  std::span<const Entry> entries() const { return entries_; }
  int32_t generated(int32_t token) const;
  bool in_prompt(int32_t token) const;
  // Distinct generated tokens (those with generated > 0), for penalties that ignore the prompt.
  std::span<const int32_t> generated_entries() const { return generated_entries_; }

 private:
  Entry& Find(int32_t token);  // inserts when absent
  const Entry* Lookup(int32_t token) const;
  void Rehash(size_t slots);

  std::vector<Entry> entries_;
  std::vector<int32_t> generated_entries_;  // indices into entries_
  std::vector<int32_t> slots_;              // index into entries_, or -1
};

using PenaltyParams = kernels::PenaltyParams;

// The tokens `counts` knows, as the sampling rule takes them (appended to `out`): each one's
// logit becomes kernels::PenalisedLogit of itself (repetition for prompt and output, then
// presence and frequency for output).
void AppendPenaltyTokens(const TokenCounts& counts, std::vector<kernels::PenaltyToken>* out);

using TopLogprob = kernels::TokenLogprob;
using kernels::ComputeLogprobs;  // kernels/logprobs.h

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_LOGITS_PROCESSORS_H_
