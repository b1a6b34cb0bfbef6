// The vocabulary as a trie of the tokens' bytes, and the walk that finds which tokens a grammar
// allows next (structured output's mask).
//
// A grammar constrains bytes; a step chooses a token, whose bytes are a string. A token is allowed
// when the grammar accepts all of its bytes after the output so far. Tokens that share a prefix
// share the work of matching it: the walk advances the matcher once per trie edge, depth first,
// and skips a whole subtree as soon as its first byte is refused. Inside a JSON string nearly
// every token is allowed and the walk visits the whole trie; between JSON tokens most subtrees
// die at their first byte.
#ifndef TANDEM_ENGINE_TOKEN_TRIE_H_
#define TANDEM_ENGINE_TOKEN_TRIE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/grammar_matcher.h"
#include "models/tokenizer.h"

namespace tandem::engine {

class TokenTrie {
 public:
  // Tokens with no bytes are left out: they can never be allowed.
  explicit TokenTrie(std::vector<std::pair<int32_t, std::string>> tokens);
  // Every token of `tokenizer` but its special ones (BOS, EOS, chat markers), with the bytes it
  // adds to the text (models::Tokenizer::TokenBytes).
  static TokenTrie FromTokenizer(const models::Tokenizer& tokenizer);

  // Appends to `allowed` (in no particular order) every token whose bytes `matcher` accepts
  // after its state, which it leaves unchanged. `levels` is scratch the caller keeps between
  // calls, so that a walk allocates nothing once warm. RESOURCE_EXHAUSTED when the grammar is
  // too ambiguous (GrammarMatcher::kMaxStacks).
  absl::Status AllowedTokens(GrammarMatcher& matcher, std::vector<ParseState>* levels,
                             std::vector<int32_t>* allowed) const;

  size_t num_nodes() const { return byte_.size(); }
  size_t num_tokens() const { return token_ids_.size(); }

 private:
  // Nodes in depth-first preorder, the root (the empty string) first: node n's subtree is
  // [n, n + subtree_size_[n]), its first child is n + 1, and its next sibling is
  // n + subtree_size_[n]. Node n's tokens are token_ids_[token_begin_[n], token_begin_[n + 1]).
  std::vector<uint8_t> byte_;  // the byte on the edge into the node
  std::vector<int32_t> subtree_size_;
  std::vector<int32_t> token_begin_;
  std::vector<int32_t> token_ids_;
  size_t max_depth_ = 0;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_TOKEN_TRIE_H_
