#include "engine/token_trie.h"

#include <algorithm>

namespace tandem::engine {

TokenTrie::TokenTrie(std::vector<std::pair<int32_t, std::string>> tokens) {
  std::erase_if(tokens, [](const auto& t) { return t.second.empty(); });
  // Sorted by bytes, a string comes right before the strings it prefixes, so the trie is built
  // in preorder by keeping the path to the previous string.
  std::sort(tokens.begin(), tokens.end(), [](const auto& a, const auto& b) {
    return a.second < b.second || (a.second == b.second && a.first < b.first);
  });
  byte_.push_back(0);
  subtree_size_.push_back(0);
  token_begin_.push_back(0);
  std::vector<int32_t> path = {0};  // path[d]: the node at depth d
  std::string previous;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      subtree_size_[path.back()] = static_cast<int32_t>(byte_.size()) - path.back();
      path.pop_back();
    }
  };
  for (const auto& [id, bytes] : tokens) {
    const size_t common = static_cast<size_t>(
        std::mismatch(previous.begin(), previous.end(), bytes.begin(), bytes.end()).first -
        previous.begin());
    close_to(std::min(common, path.size() - 1));
    for (size_t d = path.size() - 1; d < bytes.size(); ++d) {
      path.push_back(static_cast<int32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(bytes[d]));
      subtree_size_.push_back(0);
      token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
    }
    token_ids_.push_back(id);
    id_bound_ = std::max(id_bound_, id + 1);
    previous = bytes;
  }
  close_to(0);
  subtree_size_[0] = static_cast<int32_t>(byte_.size());
  token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));

  // The bytes below each node and its subtree's height, children before parents (reverse
  // preorder).
  std::vector<ByteSet> below(byte_.size());
  height_.assign(byte_.size(), 0);
  for (size_t n = byte_.size(); n-- > 0;) {
    const auto end = n + static_cast<size_t>(subtree_size_[n]);
    for (size_t c = n + 1; c < end; c += static_cast<size_t>(subtree_size_[c])) {
      below[n].Add(ByteSet::Of(byte_[c])).Add(below[c]);
      height_[n] = static_cast<uint8_t>(std::max<int>(height_[n], std::min(255, height_[c] + 1)));
    }
  }
  absl::flat_hash_map<ByteSet, int32_t> numbers;
  below_.reserve(byte_.size());
  for (const ByteSet& set : below) {
    const auto [it, added] = numbers.try_emplace(set, static_cast<int32_t>(byte_sets_.size()));
    if (added) byte_sets_.push_back(set);
    below_.push_back(it->second);
  }
}

TokenTrie TokenTrie::FromTokenizer(const models::Tokenizer& tokenizer, int32_t id_limit) {
  std::vector<std::pair<int32_t, std::string>> tokens;
  for (int32_t id = 0; id < std::min(tokenizer.vocab_size(), id_limit); ++id) {
    if (!tokenizer.IsSpecial(id)) tokens.emplace_back(id, tokenizer.TokenBytes(id));
  }
  return TokenTrie(std::move(tokens));
}

namespace {

// The walk's numbering of parse states and their memoised transitions.
class StateTable {
 public:
  StateTable(GrammarMatcher& matcher, TrieWalkScratch& scratch)
      : matcher_(matcher), s_(scratch) {
    s_.states.clear();
    s_.numbers.clear();
    s_.next.clear();
    s_.successors.clear();
  }

  int32_t Number(const ParseState& state) {
    const auto [it, added] = s_.numbers.try_emplace(state, static_cast<int32_t>(s_.states.size()));
    if (added) {
      s_.states.push_back(state);
      s_.next.emplace_back();
      s_.next.back().fill(TrieWalkScratch::kUnknown);
      s_.successors.emplace_back();
    }
    return it->second;
  }

  // The state after `byte`, or kDead.
  absl::StatusOr<int32_t> Step(int32_t state, uint8_t byte) {
    int32_t known = s_.next[state][byte];
    if (known != TrieWalkScratch::kUnknown) return known;
    if (!matcher_.Allows(s_.states[state], byte)) {
      known = TrieWalkScratch::kDead;
    } else {
      if (absl::Status s = matcher_.Advance(s_.states[state], byte, &s_.advanced); !s.ok()) return s;
      known = s_.advanced.empty() ? TrieWalkScratch::kDead : Number(s_.advanced);
    }
    s_.next[state][byte] = known;
    return known;
  }

  // The one state every byte of `bytes` leads `state` to, or kMixed when two lead to different
  // states or one is refused. Each byte's transition is computed once per state.
  absl::StatusOr<int32_t> Successor(int32_t state, const ByteSet& bytes) {
    ByteSet unknown = bytes;
    unknown.Remove(s_.successors[state].known);
    for (int b = 0; !unknown.empty() && b < 256; ++b) {
      const auto byte = static_cast<uint8_t>(b);
      if (!unknown.Has(byte)) continue;
      unknown.Remove(ByteSet::Of(byte));
      absl::StatusOr<int32_t> next = Step(state, byte);
      if (!next.ok()) return next.status();
      TrieWalkScratch::Successors& info = s_.successors[state];  // Step may grow the table
      info.known.Add(ByteSet::Of(byte));
      auto group = std::find_if(info.by_state.begin(), info.by_state.end(),
                                [&](const auto& g) { return g.first == *next; });
      if (group == info.by_state.end()) {
        info.by_state.emplace_back(*next, ByteSet::Of(byte));
      } else {
        group->second.Add(ByteSet::Of(byte));
      }
    }
    if (bytes.empty()) return state;  // nothing moves it
    for (const auto& [to, group] : s_.successors[state].by_state) {
      if (bytes.SubsetOf(group)) return to == TrieWalkScratch::kDead ? TrieWalkScratch::kMixed : to;
      if (!bytes.Disjoint(group)) return TrieWalkScratch::kMixed;
    }
    return TrieWalkScratch::kMixed;
  }

  // Whether every string of at most `depth` bytes of `bytes` is accepted from `state`: true when
  // each byte leads to one same state, from which the same holds for one byte fewer.
  absl::StatusOr<bool> AcceptsAll(int32_t state, const ByteSet& bytes, int depth) {
    for (int d = 0; d < depth; ++d) {
      absl::StatusOr<int32_t> next = Successor(state, bytes);
      if (!next.ok()) return next.status();
      if (*next == TrieWalkScratch::kMixed) return false;
      if (*next == state) return true;  // a loop: it holds at any depth
      state = *next;
    }
    return true;
  }

 private:
  GrammarMatcher& matcher_;
  TrieWalkScratch& s_;
};

}  // namespace

absl::Status TokenTrie::AllowedTokens(GrammarMatcher& matcher, TrieWalkScratch* scratch,
                                      std::vector<int32_t>* allowed) const {
  const size_t mark = matcher.Mark();
  StateTable table(matcher, *scratch);
  auto& stack = scratch->stack;
  stack.clear();
  stack.push_back({0, table.Number(matcher.state()), 1});
  absl::Status status;
  while (!stack.empty() && status.ok()) {
    TrieWalkScratch::Visit& top = stack.back();
    const int32_t end = top.node + subtree_size_[top.node];
    if (top.next_child >= end) {
      stack.pop_back();
      continue;
    }
    const int32_t child = top.next_child;
    top.next_child += subtree_size_[child];
    const int32_t from = top.state;
    absl::StatusOr<int32_t> state = table.Step(from, byte_[child]);
    if (!state.ok()) {
      status = state.status();
      break;
    }
    if (*state == TrieWalkScratch::kDead) continue;
    const int32_t subtree_end = child + subtree_size_[child];
    absl::StatusOr<bool> whole =
        table.AcceptsAll(*state, byte_sets_[below_[child]], height_[child]);
    if (!whole.ok()) {
      status = whole.status();
      break;
    }
    if (*whole) {
      // Every token below is allowed: they are contiguous in preorder.
      allowed->insert(allowed->end(), token_ids_.begin() + token_begin_[child],
                      token_ids_.begin() + token_begin_[subtree_end]);
      continue;
    }
    allowed->insert(allowed->end(), token_ids_.begin() + token_begin_[child],
                    token_ids_.begin() + token_begin_[child + 1]);
    stack.push_back({child, *state, child + 1});
  }
  matcher.Rewind(mark);
  // A walk through many distinct states (a long enum's trie) leaves a large table behind; a
  // sequence keeps its scratch for its whole life, so that much is given back.
  constexpr size_t kKeptStates = 1024;
  if (scratch->next.capacity() > kKeptStates) {
    scratch->next = {};
    scratch->states = {};
    scratch->successors = {};
    scratch->numbers = {};
  }
  return status;
}

}  // namespace tandem::engine
