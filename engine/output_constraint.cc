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
  if (absl::Status s = trie_->AllowedTokens(matcher_, &levels_, allowed); !s.ok()) return s;
  if (matcher_.complete()) allowed->insert(allowed->end(), end_tokens.begin(), end_tokens.end());
  std::sort(allowed->begin(), allowed->end());
  allowed->erase(std::unique(allowed->begin(), allowed->end()), allowed->end());
  return absl::OkStatus();
}

}  // namespace tandem::engine
