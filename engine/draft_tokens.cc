#include "engine/draft_tokens.h"

#include <algorithm>

namespace tandem::engine {

namespace {

// A candidate place: the draft would start at corpus position `at`, after `length` tokens equal
// to the end of the sequence.
struct Place {
  int32_t length = 0;
  size_t at = 0;
  bool in_prediction = false;
};

size_t Distance(size_t a, size_t b) { return a > b ? a - b : b - a; }

// Whether `candidate` (found after `best` in the scan: later, or in the prediction) beats it.
bool Better(const Place& candidate, const Place& best, size_t hint) {
  if (candidate.length != best.length) return candidate.length > best.length;
  if (candidate.in_prediction && best.in_prediction && hint != 0) {
    return Distance(candidate.at, hint) <= Distance(best.at, hint);
  }
  return true;  // later, or the prediction's over the sequence's
}

// Scans positions [begin, end) of a corpus read through `token_at` for places whose preceding
// tokens match the end of `tokens`, keeping the best in `best`.
template <typename TokenAt>
void Search(std::span<const int32_t> tokens, TokenAt token_at, size_t begin, size_t end,
            bool in_prediction, const DraftOptions& options, size_t hint, Place* best) {
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
    const Place candidate{whole ? options.max_match : static_cast<int32_t>(matched), at,
                          in_prediction};
    if (Better(candidate, *best, hint)) *best = candidate;
  }
}

}  // namespace

std::optional<DraftPlace> ProposeDraft(std::span<const int32_t> tokens, size_t prompt_tokens,
                                       std::span<const int32_t> prediction,
                                       const DraftOptions& options, std::vector<int32_t>* draft,
                                       size_t prediction_hint) {
  draft->clear();
  if (tokens.empty() || options.max_tokens <= 0 || prompt_tokens > tokens.size()) {
    return std::nullopt;
  }
  Place best;
  if (options.prompt_lookup) {
    // Every place but the end itself, which nothing follows yet.
    Search(
        tokens, [&](size_t i) { return tokens[i]; }, 1, tokens.size(), false, options,
        prediction_hint, &best);
  }
  // The expected sequence: the prompt, then the prediction. Only places inside the prediction
  // are new; the prompt's were searched above (its tokens still take part in matches).
  auto expected = [&](size_t i) {
    return i < prompt_tokens ? tokens[i] : prediction[i - prompt_tokens];
  };
  if (!prediction.empty()) {
    Search(tokens, expected, prompt_tokens, prompt_tokens + prediction.size(), true, options,
           prediction_hint, &best);
  }
  if (best.length < std::max(options.min_match, 1)) return std::nullopt;
  const size_t corpus_end = best.in_prediction ? prompt_tokens + prediction.size() : tokens.size();
  const size_t end = std::min(corpus_end, best.at + static_cast<size_t>(options.max_tokens));
  for (size_t i = best.at; i < end; ++i) {
    draft->push_back(best.in_prediction ? expected(i) : tokens[i]);
  }
  return DraftPlace{best.in_prediction, best.at};
}

}  // namespace tandem::engine
