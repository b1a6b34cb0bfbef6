// One request's structured output: the grammar its text must follow (a JSON Schema compiled by
// engine/json_schema_grammar.h), where its output stands in that grammar, and which tokens may
// come next.
//
// The grammar reads the bytes the tokens add to the text (models::Tokenizer::TokenBytes), so a
// token that ends inside a UTF-8 character is allowed when the character can still be completed.
// Special tokens (end of sequence, chat markers) are not in the vocabulary walk; the caller's end
// tokens are allowed exactly when the output so far is a whole sentence, and its markup tokens
// (special tokens the model writes as text, such as a tool-call marker) where their bytes are.
// One thing can make the text differ from the bytes the grammar read: a SentencePiece tokenizer
// drops the first output token's leading space when the prompt decodes to nothing. That cannot
// break a JSON grammar, which allows leading whitespace.
#ifndef TANDEM_ENGINE_OUTPUT_CONSTRAINT_H_
#define TANDEM_ENGINE_OUTPUT_CONSTRAINT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "engine/token_trie.h"

namespace tandem::engine {

// A special token allowed wherever the grammar allows its bytes.
struct MarkupToken {
  int32_t id = 0;
  std::string bytes;
};

class OutputConstraint {
 public:
  // RESOURCE_EXHAUSTED when the grammar is too ambiguous to start (GrammarMatcher::kMaxStacks).
  static absl::StatusOr<OutputConstraint> Create(std::shared_ptr<const Grammar> grammar,
                                                 std::shared_ptr<const TokenTrie> trie,
                                                 std::vector<MarkupToken> markup = {});

  // The tokens that may come next, ascending, into *allowed: every token whose bytes the grammar
  // accepts after the output so far, and `end_tokens` exactly when the output so far is
  // complete (an ordinary token that is also an end token, such as a newline given as a stop
  // id, would otherwise end a value half written). Empty when nothing may follow (complete()
  // says whether the output may simply end there).
  absl::Status AllowedTokens(std::span<const int32_t> end_tokens, std::vector<int32_t>* allowed);
  // The output grew by a token with these bytes (one AllowedTokens admitted).
  absl::Status Accept(std::string_view token_bytes) { return matcher_.Accept(token_bytes); }
  bool complete() const { return matcher_.complete(); }
  // Whether some token could still extend the text (false: it is whole and must end here).
  bool can_continue() const { return matcher_.can_continue(); }

 private:
  OutputConstraint(GrammarMatcher matcher, std::shared_ptr<const TokenTrie> trie,
                   std::vector<MarkupToken> markup)
      : matcher_(std::move(matcher)), trie_(std::move(trie)), markup_(std::move(markup)) {}
  // Whether the grammar takes `bytes` next (the state is left as it was).
  absl::StatusOr<bool> Takes(std::string_view bytes);

  GrammarMatcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<MarkupToken> markup_;
  ParseState takes_state_, takes_next_;  // Takes' scratch, kept so a step allocates nothing
  TrieWalkScratch walk_;
  std::vector<uint8_t> marks_;  // by token id, to order a large allowed set without sorting
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_OUTPUT_CONSTRAINT_H_
