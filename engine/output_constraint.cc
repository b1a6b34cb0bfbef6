#include "engine/output_constraint.h"

#include <algorithm>
#include <utility>

namespace tandem::engine {

absl::StatusOr<OutputConstraint> OutputConstraint::Create(std::shared_ptr<const Grammar> grammar,
                                                          std::shared_ptr<const TokenTrie> trie,
                                                          std::vector<MarkupToken> markup) {
  absl::StatusOr<GrammarMatcher> matcher = GrammarMatcher::Create(std::move(grammar));
  if (!matcher.ok()) return matcher.status();
  std::erase_if(markup, [](const MarkupToken& m) { return m.bytes.empty(); });
  return OutputConstraint(*std::move(matcher), std::move(trie), std::move(markup));
}

absl::StatusOr<bool> OutputConstraint::Takes(std::string_view bytes) {
  const size_t mark = matcher_.Mark();
  ParseState& state = takes_state_;
  ParseState& next = takes_next_;
  state = matcher_.state();
  absl::StatusOr<bool> takes = true;
  for (const char c : bytes) {
    if (absl::Status s = matcher_.Advance(state, static_cast<uint8_t>(c), &next); !s.ok()) {
      takes = s;
      break;
    }
    if (next.empty()) {
      takes = false;
      break;
    }
    state.swap(next);
  }
  matcher_.Rewind(mark);
  return takes;
}

absl::Status OutputConstraint::AllowedTokens(std::span<const int32_t> end_tokens,
                                             std::vector<int32_t>* allowed) {
  allowed->clear();
  if (absl::Status s = trie_->AllowedTokens(matcher_, &walk_, allowed); !s.ok()) return s;
  for (const MarkupToken& m : markup_) {
    absl::StatusOr<bool> takes = Takes(m.bytes);
    if (!takes.ok()) return takes.status();
    if (*takes) allowed->push_back(m.id);
  }
  const bool whole = matcher_.complete();
  std::erase_if(*allowed, [&](int32_t id) {
    return std::find(end_tokens.begin(), end_tokens.end(), id) != end_tokens.end();
  });
  if (whole) allowed->insert(allowed->end(), end_tokens.begin(), end_tokens.end());
  // Ascending without duplicates: a sort for a few tokens, a pass over marks for many (inside a
  // string most of a large vocabulary is allowed, and sorting it cost more than the walk).
  int32_t bound = trie_->id_bound();
  for (const int32_t id : end_tokens) bound = std::max(bound, id + 1);
  for (const MarkupToken& m : markup_) bound = std::max(bound, m.id + 1);
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
