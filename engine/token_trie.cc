#include "engine/token_trie.h"

#include <algorithm>

namespace tandem::engine {

TokenTrie::TokenTrie(std::vector<std::pair<int32_t, std::string>> tokens) {
  std::erase_if(tokens, [](const auto& t) { return t.second.empty(); });
  // Sorted by bytes, a string comes right before the strings it prefixes, so the trie is built
  // in preorder by keeping the path to the previous string.
  std::sort(tokens.begin(), tokens.end(),
            [](const auto& a, const auto& b) { return a.second < b.second || (a.second == b.second && a.first < b.first); });
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
    max_depth_ = std::max(max_depth_, bytes.size());
    previous = bytes;
  }
  close_to(0);
  subtree_size_[0] = static_cast<int32_t>(byte_.size());
  token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
}

TokenTrie TokenTrie::FromTokenizer(const models::Tokenizer& tokenizer) {
  std::vector<std::pair<int32_t, std::string>> tokens;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.IsSpecial(id)) tokens.emplace_back(id, tokenizer.TokenBytes(id));
  }
  return TokenTrie(std::move(tokens));
}

absl::Status TokenTrie::AllowedTokens(GrammarMatcher& matcher, std::vector<ParseState>* levels,
                                      std::vector<int32_t>* allowed) const {
  if (levels->size() < max_depth_ + 1) levels->resize(max_depth_ + 1);
  (*levels)[0] = matcher.state();
  // Depth-first over the children of each node on `stack`, node by node; the frames a child's
  // subtree made are released when the walk moves past it.
  struct Visit {
    int32_t next_child;  // the next child of the node at this depth to try
    int32_t end;         // one past the node's subtree
    size_t mark;         // the matcher's arena before this depth's state was made
  };
  std::vector<Visit> stack;
  stack.reserve(max_depth_ + 1);
  stack.push_back({1, subtree_size_[0], matcher.Mark()});
  while (!stack.empty()) {
    Visit& top = stack.back();
    if (top.next_child >= top.end) {
      matcher.Rewind(top.mark);
      stack.pop_back();
      continue;
    }
    const int32_t child = top.next_child;
    top.next_child += subtree_size_[child];
    const size_t depth = stack.size() - 1;
    const ParseState& here = (*levels)[depth];
    if (!matcher.Allows(here, byte_[child])) continue;
    const size_t mark = matcher.Mark();
    ParseState& next = (*levels)[depth + 1];
    if (absl::Status s = matcher.Advance(here, byte_[child], &next); !s.ok()) {
      matcher.Rewind(stack.front().mark);
      return s;
    }
    if (next.empty()) {
      matcher.Rewind(mark);
      continue;
    }
    allowed->insert(allowed->end(), token_ids_.begin() + token_begin_[child],
                    token_ids_.begin() + token_begin_[child + 1]);
    stack.push_back({child + 1, child + subtree_size_[child], mark});
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine
