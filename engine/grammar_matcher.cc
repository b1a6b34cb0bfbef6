#include "engine/grammar_matcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::engine {

using Kind = GrammarElement::Kind;

namespace {

absl::Status TooAmbiguous() {
  return absl::ResourceExhaustedError(
      absl::StrCat("grammar: more than ", GrammarMatcher::kMaxStacks,
                   " parses of the output are alive at once (the grammar is too ambiguous)"));
}

}  // namespace

absl::StatusOr<GrammarMatcher> GrammarMatcher::Create(std::shared_ptr<const Grammar> grammar) {
  GrammarMatcher matcher(std::move(grammar));
  const Grammar& g = *matcher.grammar_;
  for (const int32_t* a = g.alternatives_begin(g.root()); a != g.alternatives_end(g.root()); ++a) {
    matcher.Expand(*a, -1, &matcher.state_);
  }
  if (matcher.out_limit_exceeded_ > 0) return TooAmbiguous();
  return matcher;
}

void GrammarMatcher::AddTop(int32_t position, int32_t parent, ParseState* out) {
  // Two stacks with the same top position over the same lower frames are one: drop the copy.
  // (Equal chains made separately are not recognised; they only cost time.)
  for (const int32_t id : *out) {
    if (id == kCompleteStack ? position == kCompleteStack
                             : position != kCompleteStack && nodes_[id].position == position &&
                                   nodes_[id].parent == parent) {
      return;
    }
  }
  if (out->size() >= kMaxStacks) {
    ++out_limit_exceeded_;
    return;
  }
  if (position == kCompleteStack) {
    out->push_back(kCompleteStack);
    return;
  }
  nodes_.push_back({position, parent});
  out->push_back(static_cast<int32_t>(nodes_.size()) - 1);
}

void GrammarMatcher::Expand(int32_t position, int32_t parent, ParseState* out) {
  const Grammar& g = *grammar_;
  while (true) {
    const GrammarElement& e = g.element(position);
    if (e.kind == Kind::kBytes) {
      AddTop(position, parent, out);
      return;
    }
    if (e.kind == Kind::kEnd) {
      if (parent < 0) {
        AddTop(kCompleteStack, -1, out);
        return;
      }
      position = nodes_[parent].position;
      parent = nodes_[parent].parent;
      continue;
    }
    // A rule: enter each alternative with a frame returning after the reference, unless the
    // reference ends its alternative (a tail call: return straight to the caller's caller).
    int32_t return_frame = parent;
    if (g.element(position + 1).kind != Kind::kEnd) {
      nodes_.push_back({position + 1, parent});
      return_frame = static_cast<int32_t>(nodes_.size()) - 1;
    }
    for (const int32_t* a = g.alternatives_begin(e.index); a != g.alternatives_end(e.index); ++a) {
      Expand(*a, return_frame, out);
    }
    return;
  }
}

bool GrammarMatcher::IsComplete(const ParseState& state) {
  return std::find(state.begin(), state.end(), kCompleteStack) != state.end();
}

bool GrammarMatcher::Allows(const ParseState& state, uint8_t byte) const {
  for (const int32_t id : state) {
    if (id == kCompleteStack) continue;
    const GrammarElement& e = grammar_->element(nodes_[id].position);
    if (grammar_->byte_set(e.index).Has(byte)) return true;
  }
  return false;
}

bool GrammarMatcher::can_continue() const {
  return std::any_of(state_.begin(), state_.end(), [](int32_t id) { return id != kCompleteStack; });
}

absl::Status GrammarMatcher::Advance(const ParseState& state, uint8_t byte, ParseState* next) {
  next->clear();
  out_limit_exceeded_ = 0;
  for (const int32_t id : state) {
    if (id == kCompleteStack) continue;
    const Node node = nodes_[id];
    const GrammarElement& e = grammar_->element(node.position);
    if (grammar_->byte_set(e.index).Has(byte)) Expand(node.position + 1, node.parent, next);
  }
  if (out_limit_exceeded_ > 0) {
    next->clear();
    return TooAmbiguous();
  }
  return absl::OkStatus();
}

absl::Status GrammarMatcher::Accept(std::string_view bytes) {
  const size_t mark = Mark();
  ParseState current = state_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const absl::Status advanced = Advance(current, static_cast<uint8_t>(bytes[i]), &scratch_);
    if (!advanced.ok() || scratch_.empty()) {
      Rewind(mark);
      if (!advanced.ok()) return advanced;
      return absl::InvalidArgumentError(
          absl::StrFormat("grammar: byte %d of \"%s\" (0x%02X) is not allowed here", i,
                          absl::CEscape(absl::string_view(bytes.data(), bytes.size())),
                          static_cast<uint8_t>(bytes[i])));
    }
    std::swap(current, scratch_);
  }
  state_ = std::move(current);
  Compact();
  return absl::OkStatus();
}

void GrammarMatcher::Compact() {
  std::vector<Node> kept;
  std::vector<int32_t> moved(nodes_.size(), -1);
  std::vector<int32_t> chain;
  auto copy = [&](int32_t id) {
    // The frames below `id` not yet copied, top first; then copied bottom first.
    chain.clear();
    for (int32_t at = id; at >= 0 && moved[at] < 0; at = nodes_[at].parent) chain.push_back(at);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Node& node = nodes_[*it];
      kept.push_back({node.position, node.parent < 0 ? -1 : moved[node.parent]});
      moved[*it] = static_cast<int32_t>(kept.size()) - 1;
    }
    return moved[id];
  };
  for (int32_t& id : state_) {
    if (id != kCompleteStack) id = copy(id);
  }
  nodes_ = std::move(kept);
}

}  // namespace tandem::engine
