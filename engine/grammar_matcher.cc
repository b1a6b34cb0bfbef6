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

// Expansion appends duplicates before Canonical removes them; past this many it stops adding.
constexpr size_t kMaxExpanded = 4 * GrammarMatcher::kMaxStacks;

}  // namespace

absl::StatusOr<GrammarMatcher> GrammarMatcher::Create(std::shared_ptr<const Grammar> grammar) {
  GrammarMatcher matcher(std::move(grammar));
  const Grammar& g = *matcher.grammar_;
  matcher.expanded_.clear();
  for (const int32_t* a = g.alternatives_begin(g.root()); a != g.alternatives_end(g.root()); ++a) {
    matcher.Expand(*a, -1, &matcher.state_);
  }
  if (!matcher.Canonical(&matcher.state_)) return TooAmbiguous();
  return matcher;
}

int32_t GrammarMatcher::Intern(int32_t position, int32_t parent) {
  const auto [it, added] =
      frame_ids_.try_emplace(Key(position, parent), static_cast<int32_t>(frames_.size()));
  if (added) frames_.push_back({position, parent});
  return it->second;
}

void GrammarMatcher::Rewind(size_t mark) {
  for (size_t i = mark; i < frames_.size(); ++i) {
    frame_ids_.erase(Key(frames_[i].position, frames_[i].parent));
  }
  frames_.resize(mark);
}

void GrammarMatcher::Expand(int32_t position, int32_t parent, ParseState* out) {
  const Grammar& g = *grammar_;
  // Iterative, so that a long chain of rules entered before a byte cannot exhaust the thread's
  // stack. A (position, parent) pair expands the same way wherever it comes from, so each is
  // expanded once per Advance: rules shared by many alternatives cannot multiply the work.
  expand_work_.clear();
  expand_work_.push_back({position, parent});
  while (!expand_work_.empty() && !overflowed_) {
    auto [at, below] = expand_work_.back();
    expand_work_.pop_back();
    while (expanded_.insert(Key(at, below)).second) {
      const GrammarElement& e = g.element(at);
      if (e.kind == Kind::kBytes) {
        if (out->size() >= kMaxExpanded) {
          overflowed_ = true;
        } else {
          out->push_back(Intern(at, below));
        }
        break;
      }
      if (e.kind == Kind::kEnd) {
        if (below < 0) {
          out->push_back(kCompleteStack);
          break;
        }
        const Frame caller = frames_[below];
        at = caller.position;
        below = caller.parent;
        continue;
      }
      // A rule: enter each alternative with a frame returning after the reference, unless the
      // reference ends its alternative (a tail call: return straight to the caller's caller).
      const int32_t return_frame =
          g.element(at + 1).kind == Kind::kEnd ? below : Intern(at + 1, below);
      for (const int32_t* a = g.alternatives_begin(e.index); a != g.alternatives_end(e.index); ++a) {
        expand_work_.push_back({*a, return_frame});
      }
      break;
    }
  }
}

bool GrammarMatcher::Canonical(ParseState* out) {
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  const bool fits = !overflowed_ && out->size() <= kMaxStacks;
  overflowed_ = false;
  if (!fits) out->clear();
  return fits;
}

bool GrammarMatcher::Allows(const ParseState& state, uint8_t byte) const {
  for (const int32_t id : state) {
    if (id == kCompleteStack) continue;
    const GrammarElement& e = grammar_->element(frames_[id].position);
    if (grammar_->byte_set(e.index).Has(byte)) return true;
  }
  return false;
}

bool GrammarMatcher::can_continue() const {
  return !state_.empty() && state_.back() != kCompleteStack;
}

absl::Status GrammarMatcher::Advance(const ParseState& state, uint8_t byte, ParseState* next) {
  next->clear();
  expanded_.clear();
  for (const int32_t id : state) {
    if (id == kCompleteStack) continue;
    const Frame frame = frames_[id];
    const GrammarElement& e = grammar_->element(frame.position);
    if (grammar_->byte_set(e.index).Has(byte)) Expand(frame.position + 1, frame.parent, next);
  }
  if (!Canonical(next)) return TooAmbiguous();
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
  std::vector<Frame> old = std::move(frames_);
  frames_.clear();
  frame_ids_.clear();
  std::vector<int32_t> moved(old.size(), -1);
  std::vector<int32_t> chain;
  auto copy = [&](int32_t id) {
    // The frames below `id` not yet copied, top first; then copied bottom first.
    chain.clear();
    for (int32_t at = id; at >= 0 && moved[at] < 0; at = old[at].parent) chain.push_back(at);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Frame& frame = old[*it];
      moved[*it] = Intern(frame.position, frame.parent < 0 ? -1 : moved[frame.parent]);
    }
    return moved[id];
  };
  for (int32_t& id : state_) {
    if (id != kCompleteStack) id = copy(id);
  }
  Canonical(&state_);
}

}  // namespace tandem::engine
