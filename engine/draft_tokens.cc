#include "engine/draft_tokens.h"

#include <algorithm>

namespace tandem::engine {

namespace {

// The best place found so far: the draft starts at corpus position `at`, after `matched` tokens
// equal to the end of the sequence.
struct Place {
  int32_t matched = 0;
  size_t at = 0;
  bool in_prediction = false;
};

// Scans positions [begin, end) of a corpus read through `token_at` for places whose preceding
// tokens match the end of `tokens`, keeping the longest in `best` (a later or equal one wins,
// which is how ties go to the latest place and then to the prediction, searched second).
template <typename TokenAt>
void Search(std::span<const int32_t> tokens, TokenAt token_at, size_t begin, size_t end,
            bool in_prediction, const DraftOptions& options, Place* best) {
  const size_t n = tokens.size();
  const int32_t last = tokens[n - 1];
  const auto limit = static_cast<size_t>(options.max_match);
  for (size_t at = std::max<size_t>(begin, 1); at < end; ++at) {
    if (token_at(at - 1) != last) continue;
    size_t matched = 1;
    while (matched < limit && matched < at && matched < n &&
           token_at(at - 1 - matched) == tokens[n - 1 - matched]) {
      ++matched;
    }
    // A match back to the sequence's start (the prediction's first place, a short prompt) is as
    // long as any can be.
    const bool whole = matched == n;
    const int32_t length = whole ? options.max_match : static_cast<int32_t>(matched);
    if (length >= best->matched) {
      *best = {length, at, in_prediction};
    }
  }
}

}  // namespace

void ProposeDraft(std::span<const int32_t> tokens, size_t prompt_tokens,
                  std::span<const int32_t> prediction, const DraftOptions& options,
                  std::vector<int32_t>* draft) {
  draft->clear();
  if (tokens.empty() || options.max_tokens <= 0 || prompt_tokens > tokens.size()) return;
  Place best;
  if (options.prompt_lookup) {
    // Every place but the end itself, which nothing follows yet.
    Search(
        tokens, [&](size_t i) { return tokens[i]; }, 1, tokens.size(), false, options, &best);
  }
  // The expected sequence: the prompt, then the prediction. Only places inside the prediction
  // are new; the prompt's were searched above (its tokens still take part in matches).
  auto expected = [&](size_t i) {
    return i < prompt_tokens ? tokens[i] : prediction[i - prompt_tokens];
  };
  if (!prediction.empty()) {
    Search(tokens, expected, prompt_tokens, prompt_tokens + prediction.size(), true, options,
           &best);
  }
  if (best.matched < std::max(options.min_match, 1)) return;
  const size_t corpus_end = best.in_prediction ? prompt_tokens + prediction.size() : tokens.size();
  const size_t end = std::min(corpus_end, best.at + static_cast<size_t>(options.max_tokens));
  for (size_t i = best.at; i < end; ++i) {
    draft->push_back(best.in_prediction ? expected(i) : tokens[i]);
  }
}

}  // namespace tandem::engine
