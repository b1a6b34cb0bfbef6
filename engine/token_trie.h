// The vocabulary as a trie of the tokens' bytes, and the walk that finds which tokens a grammar
// allows next (structured output's mask).
//
// A grammar constrains bytes; a step chooses a token, whose bytes are a string. A token is allowed
// when the grammar accepts all of its bytes after the output so far. Tokens that share a prefix
// share the work of matching it: the walk goes down the trie depth first, advancing the parse
// state once per edge, and drops a subtree at its first refused byte.
//
// Two things keep the walk cheap where nearly every token is allowed (inside a JSON string):
//  - transitions are memoised per walk: parse states are canonical (engine/grammar_matcher.h),
//    so the walk numbers the distinct states it meets and advances each by each byte once;
//  - a subtree is taken whole when every string of its bytes is accepted: each node knows the
//    set of bytes on the edges below it and how deep its subtree goes, and when every byte of
//    that set leads the state to one same state, and so on for as many bytes as the subtree is
//    deep, every token below is allowed (contiguous in preorder) without visiting them. That
//    covers a letter inside a string (it leads the state back to itself) and inside a string
//    with maxLength (it leads to the state with one character fewer left).
#ifndef TANDEM_ENGINE_TOKEN_TRIE_H_
#define TANDEM_ENGINE_TOKEN_TRIE_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "models/tokenizer.h"

namespace tandem::engine {

// What a walk numbers and memoises, kept by the caller between walks so that a warm walk
// allocates little. Valid for one walk only: the walk clears it.
struct TrieWalkScratch {
  static constexpr int32_t kUnknown = -2;  // transition not computed yet
  static constexpr int32_t kDead = -1;     // the byte is refused
  std::vector<ParseState> states;          // by state number
  absl::flat_hash_map<ParseState, int32_t> numbers;
  std::vector<std::array<int32_t, 256>> next;  // by state number, then byte
  // By state number: the bytes whose transition is known, and those bytes grouped by the state
  // they lead to (kDead included), so that "do all these bytes lead to one state?" is a few
  // word operations once the bytes are known.
  static constexpr int32_t kMixed = -3;
  struct Successors {
    ByteSet known;
    std::vector<std::pair<int32_t, ByteSet>> by_state;
  };
  std::vector<Successors> successors;
  ParseState advanced;
  struct Visit {
    int32_t node;
    int32_t state;
    int32_t next_child;
  };
  std::vector<Visit> stack;
};

class TokenTrie {
 public:
  // Tokens with no bytes are left out: they can never be allowed.
  explicit TokenTrie(std::vector<std::pair<int32_t, std::string>> tokens);
  // Every token of `tokenizer` below `id_limit` (the model's vocabulary: a tokenizer may know
  // more ids than the model has logits for) but its special ones (BOS, EOS, chat markers), with
  // the bytes it adds to the text (models::Tokenizer::TokenBytes).
  static TokenTrie FromTokenizer(const models::Tokenizer& tokenizer, int32_t id_limit);

  // Appends to `allowed` (in no particular order) every token whose bytes `matcher` accepts
  // after its state, which it leaves unchanged. RESOURCE_EXHAUSTED when the grammar is too
  // ambiguous (GrammarMatcher::kMaxStacks).
  absl::Status AllowedTokens(GrammarMatcher& matcher, TrieWalkScratch* scratch,
                             std::vector<int32_t>* allowed) const;

  size_t num_nodes() const { return byte_.size(); }
  size_t num_tokens() const { return token_ids_.size(); }
  int32_t id_bound() const { return id_bound_; }  // one past the largest token id

 private:
  // Nodes in depth-first preorder, the root (the empty string) first: node n's subtree is
  // [n, n + subtree_size_[n]), its first child is n + 1, and its next sibling is
  // n + subtree_size_[n]. The tokens of node n are token_ids_[token_begin_[n],
  // token_begin_[n + 1]); those of its subtree, token_ids_[token_begin_[n],
  // token_begin_[n + subtree_size_[n]]).
  std::vector<uint8_t> byte_;  // the byte on the edge into the node
  std::vector<int32_t> subtree_size_;
  std::vector<int32_t> token_begin_;
  std::vector<int32_t> token_ids_;
  // The bytes on the edges below each node, as an index into byte_sets_ (few distinct sets:
  // every leaf has the empty one).
  std::vector<int32_t> below_;
  std::vector<ByteSet> byte_sets_;
  std::vector<uint8_t> height_;  // edges on the longest path down from the node (at most 255)
  int32_t id_bound_ = 0;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_TOKEN_TRIE_H_
