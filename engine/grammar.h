// A context-free grammar over bytes: what structured output (a JSON Schema, any JSON object)
// compiles to, and what GrammarMatcher (engine/grammar_matcher.h) walks token by token.
//
// A grammar is a set of rules; a rule is one or more alternatives; an alternative is a sequence
// of symbols, each either a set of bytes (one byte of input from the set) or a reference to a
// rule. Rule 0 is the root: the grammar accepts exactly the byte strings the root derives.
// Bytes, not characters, because tokens are byte strings that may end inside a UTF-8 character;
// a grammar that wants valid UTF-8 spells its multi-byte forms out (Utf8Character() below).
//
// The matcher expands rule references without consuming input, so a rule that can reach itself
// before consuming a byte (left recursion, possibly through empty rules) would never finish:
// Build() refuses such grammars, naming the rule. Repetition is written right-recursively
// (GrammarBuilder::Star), which the matcher runs in constant stack depth.
#ifndef TANDEM_ENGINE_GRAMMAR_H_
#define TANDEM_ENGINE_GRAMMAR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::engine {

// A set of byte values.
class ByteSet {
 public:
  static ByteSet Of(uint8_t byte) { return Range(byte, byte); }
  static ByteSet Range(uint8_t first, uint8_t last);  // inclusive; empty when first > last
  ByteSet& Add(const ByteSet& other);
  ByteSet& Remove(const ByteSet& other);
  bool Has(uint8_t byte) const { return (bits_[byte >> 6] >> (byte & 63)) & 1; }
  bool empty() const { return (bits_[0] | bits_[1] | bits_[2] | bits_[3]) == 0; }
  bool operator==(const ByteSet& other) const { return bits_ == other.bits_; }
  // Whether every byte of this set is in `other`.
  bool SubsetOf(const ByteSet& other) const {
    for (size_t i = 0; i < bits_.size(); ++i) {
      if ((bits_[i] & ~other.bits_[i]) != 0) return false;
    }
    return true;
  }
  bool Disjoint(const ByteSet& other) const {
    for (size_t i = 0; i < bits_.size(); ++i) {
      if ((bits_[i] & other.bits_[i]) != 0) return false;
    }
    return true;
  }
  template <typename H>
  friend H AbslHashValue(H h, const ByteSet& set) {
    return H::combine(std::move(h), set.bits_);
  }

 private:
  std::array<uint64_t, 4> bits_{};
};

// One position in a grammar's flat program: a byte set to match, a rule to expand, or the end
// of an alternative (return to the caller).
struct GrammarElement {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  int32_t index = 0;  // kBytes: into Grammar::byte_set; kRule: the rule
};

class Grammar {
 public:
  int32_t root() const { return root_; }  // the start rule
  // Positions (into element()) where each alternative of `rule` starts.
  const int32_t* alternatives_begin(int32_t rule) const {
    return alternative_starts_.data() + rule_alternatives_[rule];
  }
  const int32_t* alternatives_end(int32_t rule) const {
    return alternative_starts_.data() + rule_alternatives_[rule + 1];
  }
  const GrammarElement& element(int32_t position) const { return elements_[position]; }
  const ByteSet& byte_set(int32_t index) const { return byte_sets_[index]; }
  // The bytes its program takes, for caches that budget memory.
  size_t memory_bytes() const {
    return sizeof(Grammar) + rule_alternatives_.capacity() * sizeof(int32_t) +
           alternative_starts_.capacity() * sizeof(int32_t) +
           elements_.capacity() * sizeof(GrammarElement) + byte_sets_.capacity() * sizeof(ByteSet);
  }

 private:
  friend class GrammarBuilder;
  int32_t root_ = 0;
  std::vector<int32_t> rule_alternatives_;  // rule r: alternative_starts_[this[r], this[r + 1])
  std::vector<int32_t> alternative_starts_;
  std::vector<GrammarElement> elements_;  // each alternative ends with a kEnd element
  std::vector<ByteSet> byte_sets_;
};

// A symbol of an alternative while a grammar is being built.
struct GrammarSymbol {
  bool is_rule = false;
  int32_t rule = 0;  // is_rule
  ByteSet bytes;     // otherwise
};
using GrammarSequence = std::vector<GrammarSymbol>;

// Builds a Grammar. Rules are declared first (so that they may refer to each other, and to
// themselves), then given alternatives.
class GrammarBuilder {
 public:
  // A new rule with no alternatives yet; `name` is for error messages (need not be unique).
  int32_t DeclareRule(std::string name);
  void AddAlternative(int32_t rule, GrammarSequence sequence);
  // DeclareRule, then one alternative per sequence.
  int32_t AddRule(std::string name, std::vector<GrammarSequence> alternatives);

  static GrammarSymbol Ref(int32_t rule);
  static GrammarSymbol Bytes(const ByteSet& bytes);
  // The bytes of `text`, one symbol each.
  static GrammarSequence Literal(std::string_view text);

  // A rule deriving `sequence` zero or more times (right-recursive).
  int32_t Star(std::string name, const GrammarSequence& sequence);
  // A rule deriving `sequence` or nothing.
  int32_t Optional(std::string name, const GrammarSequence& sequence);
  // A rule deriving `sequence` between `min` and `max` times; max < 0 means no upper bound.
  // Costs O(max) rules when bounded.
  int32_t Repeat(std::string name, const GrammarSequence& sequence, int32_t min, int32_t max);
  // A rule deriving one well-formed UTF-8 encoded code point (no overlong forms, no surrogates)
  // that is either a byte of `ascii` (a subset of 0x00-0x7F) or a multi-byte character.
  int32_t Utf8Character(std::string name, const ByteSet& ascii);

  // Checks the grammar and returns it with `root` as its start rule: every rule has an
  // alternative, no rule reaches itself without consuming a byte, every rule can derive a
  // finite string, and the program stays within kMaxElements. INVALID_ARGUMENT naming the rule
  // otherwise. Rules that `root` cannot reach are kept but not checked.
  static constexpr size_t kMaxElements = size_t{1} << 20;
  // What Build's refusal says first when the grammar outgrew kMaxElements.
  static constexpr std::string_view kOverBudget = "grammar: more than";
  absl::StatusOr<Grammar> Build(int32_t root) const;

  // Whether more than kMaxElements were added: later alternatives are dropped (so that a hostile
  // schema cannot make the builder itself exhaust memory) and Build fails.
  bool over_budget() const { return elements_ > kMaxElements; }

 private:
  size_t elements_ = 0;
  std::vector<std::string> names_;
  std::vector<std::vector<GrammarSequence>> alternatives_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_GRAMMAR_H_
