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
  // Names are for error messages only; a schema's paths could otherwise make them huge.
  constexpr size_t kMaxName = 120;
  if (name.size() > kMaxName) {
    size_t cut = kMaxName - 3;
    while (cut > 0 && (static_cast<uint8_t>(name[cut]) & 0xC0) == 0x80) --cut;  // whole characters
    name = name.substr(0, cut) + "...";
  }
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

GrammarSymbol GrammarBuilder::Ref(int32_t rule) {
  return {.is_rule = true, .rule = rule, .bytes = {}};
}

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

// Which rules derive a string whose symbols all pass: a byte set passes when `bytes_pass` says
// so, a rule when it is itself marked. Worklist, linear in the grammar's size: each alternative
// counts its rule symbols not yet marked, and a rule is marked when one of its alternatives has
// no byte set that fails and its count reaches zero.
std::vector<bool> Derivable(const std::vector<std::vector<GrammarSequence>>& alternatives,
                            const std::function<bool(const ByteSet&)>& bytes_pass) {
  const size_t rules = alternatives.size();
  std::vector<bool> marked(rules, false);
  std::vector<std::pair<int32_t, int32_t>> alts;  // (rule, pending count) per alternative
  std::vector<std::vector<int32_t>> used_by(rules);  // rule -> alternatives, once per occurrence
  std::vector<int32_t> work;
  for (size_t r = 0; r < rules; ++r) {
    for (const GrammarSequence& alternative : alternatives[r]) {
      const auto a = static_cast<int32_t>(alts.size());
      int32_t pending = 0;
      bool possible = true;
      for (const GrammarSymbol& symbol : alternative) {
        if (!symbol.is_rule) {
          possible = possible && bytes_pass(symbol.bytes);
        } else {
          ++pending;
        }
      }
      alts.emplace_back(static_cast<int32_t>(r), possible ? pending : -1);
      if (!possible) continue;
      for (const GrammarSymbol& symbol : alternative) {
        if (symbol.is_rule) used_by[symbol.rule].push_back(a);
      }
      if (pending == 0 && !marked[r]) {
        marked[r] = true;
        work.push_back(static_cast<int32_t>(r));
      }
    }
  }
  while (!work.empty()) {
    const int32_t rule = work.back();
    work.pop_back();
    for (const int32_t a : used_by[rule]) {
      if (--alts[a].second == 0 && !marked[alts[a].first]) {
        marked[alts[a].first] = true;
        work.push_back(alts[a].first);
      }
    }
  }
  return marked;
}

// A rule of `reached` that can reach itself through `edges` (a rule's left-reachable rules), or
// -1. Iterative depth-first search from every rule (colours: 0 new, 1 on the path, 2 done).
int32_t FindCycle(const std::vector<std::vector<int32_t>>& edges, const std::vector<bool>& reached) {
  std::vector<uint8_t> colour(edges.size(), 0);
  std::vector<std::pair<int32_t, size_t>> path;  // (rule, next edge)
  for (size_t start = 0; start < edges.size(); ++start) {
    if (!reached[start] || colour[start] != 0) continue;
    colour[start] = 1;
    path.emplace_back(static_cast<int32_t>(start), 0);
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == edges[rule].size()) {
        colour[rule] = 2;
        path.pop_back();
        continue;
      }
      const int32_t to = edges[rule][next++];
      if (colour[to] == 1) return to;
      if (colour[to] == 0) {
        colour[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }
  return -1;
}

}  // namespace

absl::StatusOr<Grammar> GrammarBuilder::Build(int32_t root) const {
  const size_t rules = names_.size();
  if (over_budget()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(kOverBudget), " ", kMaxElements,
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
  const std::vector<bool> nullable = Derivable(alternatives_, [](const ByteSet&) { return false; });
  const std::vector<bool> finite =
      Derivable(alternatives_, [](const ByteSet& bytes) { return !bytes.empty(); });
  for (size_t r = 0; r < rules; ++r) {
    if (reached[r] && !finite[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grammar: rule '", names_[r], "' derives no finite string (it cannot end)"));
    }
  }

  // Left recursion: r -> s when s can be expanded at the start of r, before any byte is read
  // (after only rules that may derive nothing). The matcher would expand such a cycle forever.
  std::vector<std::vector<int32_t>> left(rules);
  for (size_t r = 0; r < rules; ++r) {
    if (!reached[r]) continue;
    for (const GrammarSequence& alternative : alternatives_[r]) {
      for (const GrammarSymbol& s : alternative) {
        if (!s.is_rule) break;
        left[r].push_back(s.rule);
        if (!nullable[s.rule]) break;
      }
    }
  }
  if (const int32_t looped = FindCycle(left, reached); looped >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("grammar: rule '", names_[looped],
                                                   "' can reach itself before reading a byte "
                                                   "(left recursion)"));
  }

  Grammar grammar;
  grammar.root_ = root;
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
