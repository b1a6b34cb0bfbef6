#include "engine/output_constraint.h"

#include <algorithm>
#include <utility>

namespace tandem::engine {

absl::StatusOr<OutputConstraint> OutputConstraint::Create(std::shared_ptr<const Grammar> grammar,
                                                          std::shared_ptr<const TokenTrie> trie) {
  absl::StatusOr<GrammarMatcher> matcher = GrammarMatcher::Create(std::move(grammar));
  if (!matcher.ok()) return matcher.status();
  return OutputConstraint(*std::move(matcher), std::move(trie));
}

absl::Status OutputConstraint::AllowedTokens(std::span<const int32_t> end_tokens,
                                             std::vector<int32_t>* allowed) {
  allowed->clear();
  if (absl::Status s = trie_->AllowedTokens(matcher_, &walk_, allowed); !s.ok()) return s;
  const bool whole = matcher_.complete();
  std::erase_if(*allowed, [&](int32_t id) {
    return std::find(end_tokens.begin(), end_tokens.end(), id) != end_tokens.end();
  });
  if (whole) allowed->insert(allowed->end(), end_tokens.begin(), end_tokens.end());
  // Ascending without duplicates: a sort for a few tokens, a pass over marks for many (inside a
  // string most of a large vocabulary is allowed, and sorting it cost more than the walk).
  int32_t bound = trie_->id_bound();
  for (const int32_t id : end_tokens) bound = std::max(bound, id + 1);
  if (allowed->size() * 64 < static_cast<size_t>(bound)) {
    std::sort(allowed->begin(), allowed->end());
    allowed->erase(std::unique(allowed->begin(), allowed->end()), allowed->end());
    return absl::OkStatus();
  }
  marks_.assign(static_cast<size_t>(bound), 0);
  for (const int32_t id : *allowed) marks_[static_cast<size_t>(id)] = 1;
  allowed->clear();
  for (int32_t id = 0; id < bound; ++id) {
    if (marks_[static_cast<size_t>(id)]) allowed->push_back(id);
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine
