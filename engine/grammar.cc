#include "engine/grammar.h"

#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::engine {

ByteSet ByteSet::Range(uint8_t first, uint8_t last) {
  ByteSet set;
  for (int b = first; b <= last; ++b) set.bits_[b >> 6] |= uint64_t{1} << (b & 63);
  return set;
}

ByteSet& ByteSet::Add(const ByteSet& other) {
  for (size_t i = 0; i < bits_.size(); ++i) bits_[i] |= other.bits_[i];
  return *this;
}

ByteSet& ByteSet::Remove(const ByteSet& other) {
  for (size_t i = 0; i < bits_.size(); ++i) bits_[i] &= ~other.bits_[i];
  return *this;
}

int32_t GrammarBuilder::DeclareRule(std::string name) {
  names_.push_back(std::move(name));
  alternatives_.emplace_back();
  return static_cast<int32_t>(names_.size()) - 1;
}

void GrammarBuilder::AddAlternative(int32_t rule, GrammarSequence sequence) {
  elements_ += sequence.size() + 1;
  if (over_budget()) return;
  alternatives_[rule].push_back(std::move(sequence));
}

int32_t GrammarBuilder::AddRule(std::string name, std::vector<GrammarSequence> alternatives) {
  const int32_t rule = DeclareRule(std::move(name));
  for (GrammarSequence& sequence : alternatives) AddAlternative(rule, std::move(sequence));
  return rule;
}

GrammarSymbol GrammarBuilder::Ref(int32_t rule) { return {.is_rule = true, .rule = rule}; }

GrammarSymbol GrammarBuilder::Bytes(const ByteSet& bytes) { return {.bytes = bytes}; }

GrammarSequence GrammarBuilder::Literal(std::string_view text) {
  GrammarSequence sequence;
  for (const char c : text) sequence.push_back(Bytes(ByteSet::Of(static_cast<uint8_t>(c))));
  return sequence;
}

int32_t GrammarBuilder::Star(std::string name, const GrammarSequence& sequence) {
  const int32_t rule = DeclareRule(std::move(name));
  GrammarSequence again = sequence;
  again.push_back(Ref(rule));
  AddAlternative(rule, std::move(again));
  AddAlternative(rule, {});
  return rule;
}

int32_t GrammarBuilder::Optional(std::string name, const GrammarSequence& sequence) {
  return AddRule(std::move(name), {sequence, {}});
}

int32_t GrammarBuilder::Repeat(std::string name, const GrammarSequence& sequence, int32_t min,
                               int32_t max) {
  // The optional tail first: max - min nested optionals (x (x (x)?)?)?, or x* when unbounded.
  GrammarSequence tail;
  if (max < 0) {
    tail.push_back(Ref(Star(name + "*", sequence)));
  } else {
    for (int32_t i = min; i < max && !over_budget(); ++i) {
      GrammarSequence once = sequence;
      once.insert(once.end(), tail.begin(), tail.end());
      tail = {Ref(Optional(absl::StrCat(name, "?", max - i), once))};
    }
  }
  GrammarSequence whole;
  for (int32_t i = 0; i < min && !over_budget(); ++i) {
    whole.insert(whole.end(), sequence.begin(), sequence.end());
    if (whole.size() > kMaxElements) break;
  }
  whole.insert(whole.end(), tail.begin(), tail.end());
  return AddRule(std::move(name), {std::move(whole)});
}

int32_t GrammarBuilder::Utf8Character(std::string name, const ByteSet& ascii) {
  const ByteSet tail = ByteSet::Range(0x80, 0xBF);
  auto seq = [&](std::initializer_list<ByteSet> bytes) {
    GrammarSequence s;
    for (const ByteSet& b : bytes) s.push_back(Bytes(b));
    return s;
  };
  // RFC 3629's table of well-formed byte sequences.
  return AddRule(std::move(name),
                 {seq({ascii}), seq({ByteSet::Range(0xC2, 0xDF), tail}),
                  seq({ByteSet::Of(0xE0), ByteSet::Range(0xA0, 0xBF), tail}),
                  seq({ByteSet::Range(0xE1, 0xEC), tail, tail}),
                  seq({ByteSet::Of(0xED), ByteSet::Range(0x80, 0x9F), tail}),
                  seq({ByteSet::Range(0xEE, 0xEF), tail, tail}),
                  seq({ByteSet::Of(0xF0), ByteSet::Range(0x90, 0xBF), tail, tail}),
                  seq({ByteSet::Range(0xF1, 0xF3), tail, tail, tail}),
                  seq({ByteSet::Of(0xF4), ByteSet::Range(0x80, 0x8F), tail, tail})});
}

namespace {

// Runs `update` over every rule until nothing changes; returns the per-rule flags.
std::vector<bool> Fixpoint(size_t rules, const std::function<bool(size_t, const std::vector<bool>&)>&
                                             holds) {
  std::vector<bool> flag(rules, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules; ++r) {
      if (!flag[r] && holds(r, flag)) flag[r] = changed = true;
    }
  }
  return flag;
}

}  // namespace

absl::StatusOr<Grammar> GrammarBuilder::Build(int32_t root) const {
  const size_t rules = names_.size();
  if (over_budget()) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar: more than ", kMaxElements,
                     " elements (a bound such as maxLength or minItems is too large)"));
  }
  if (root < 0 || static_cast<size_t>(root) >= rules) {
    return absl::InvalidArgumentError(absl::StrCat("grammar: no rule ", root));
  }
  // Which rules the root reaches: only they are checked.
  std::vector<bool> reached(rules, false);
  std::vector<int32_t> work = {root};
  reached[root] = true;
  size_t elements = 0;
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    if (alternatives_[r].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("grammar: rule '", names_[r], "' has no alternative"));
    }
    for (const GrammarSequence& alternative : alternatives_[r]) {
      elements += alternative.size() + 1;
      for (const GrammarSymbol& symbol : alternative) {
        if (symbol.is_rule && !reached[symbol.rule]) {
          reached[symbol.rule] = true;
          work.push_back(symbol.rule);
        }
      }
    }
  }

  // Rules that derive the empty string, and rules that derive some finite string.
  const std::vector<bool> nullable = Fixpoint(rules, [&](size_t r, const std::vector<bool>& flag) {
    for (const GrammarSequence& alternative : alternatives_[r]) {
      bool empty = true;
      for (const GrammarSymbol& s : alternative) empty = empty && s.is_rule && flag[s.rule];
      if (empty) return true;
    }
    return false;
  });
  const std::vector<bool> finite = Fixpoint(rules, [&](size_t r, const std::vector<bool>& flag) {
    for (const GrammarSequence& alternative : alternatives_[r]) {
      bool ok = true;
      for (const GrammarSymbol& s : alternative) {
        ok = ok && (s.is_rule ? static_cast<bool>(flag[s.rule]) : !s.bytes.empty());
      }
      if (ok) return true;
    }
    return false;
  });
  for (size_t r = 0; r < rules; ++r) {
    if (reached[r] && !finite[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grammar: rule '", names_[r], "' derives no finite string (it cannot end)"));
    }
  }

  // Left recursion: r -> s when s can be expanded at the start of r, before any byte. A cycle
  // among the reached rules is refused (depth-first search, colours: 0 new, 1 open, 2 done).
  std::vector<uint8_t> colour(rules, 0);
  std::function<int32_t(int32_t)> cycle_at = [&](int32_t r) -> int32_t {
    colour[r] = 1;
    for (const GrammarSequence& alternative : alternatives_[r]) {
      for (const GrammarSymbol& s : alternative) {
        if (!s.is_rule) break;
        if (colour[s.rule] == 1) return s.rule;
        if (colour[s.rule] == 0) {
          if (const int32_t found = cycle_at(s.rule); found >= 0) return found;
        }
        if (!nullable[s.rule]) break;
      }
    }
    colour[r] = 2;
    return -1;
  };
  if (const int32_t looped = cycle_at(root); looped >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grammar: rule '", names_[looped], "' can reach itself before reading a byte (left recursion)"));
  }

  Grammar grammar;
  grammar.root_ = root;
  grammar.rule_names_ = names_;
  grammar.elements_.reserve(elements);
  for (size_t r = 0; r < rules; ++r) {
    grammar.rule_alternatives_.push_back(static_cast<int32_t>(grammar.alternative_starts_.size()));
    if (!reached[r]) continue;
    for (const GrammarSequence& alternative : alternatives_[r]) {
      grammar.alternative_starts_.push_back(static_cast<int32_t>(grammar.elements_.size()));
      for (const GrammarSymbol& s : alternative) {
        if (s.is_rule) {
          grammar.elements_.push_back({GrammarElement::Kind::kRule, s.rule});
        } else {
          grammar.elements_.push_back(
              {GrammarElement::Kind::kBytes, static_cast<int32_t>(grammar.byte_sets_.size())});
          grammar.byte_sets_.push_back(s.bytes);
        }
      }
      grammar.elements_.push_back({GrammarElement::Kind::kEnd, 0});
    }
  }
  grammar.rule_alternatives_.push_back(static_cast<int32_t>(grammar.alternative_starts_.size()));
  return grammar;
}

}  // namespace tandem::engine
