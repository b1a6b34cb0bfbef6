// Sets of Unicode code points (a regular expression's character classes), and how a JSON string
// writes each member: as itself in UTF-8, or escaped where JSON requires it ('"', '\', the
// control characters). Structured output's `pattern` (json_string_pattern.h) builds on it.
#ifndef TANDEM_ENGINE_CODE_POINT_SET_H_
#define TANDEM_ENGINE_CODE_POINT_SET_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/grammar.h"

namespace tandem::engine {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, disjoint, non-adjacent inclusive ranges. Surrogates (U+D800-U+DFFF) are never members:
// they are not characters a JSON string can hold on their own.
class CodePointSet {
 public:
  static CodePointSet Of(uint32_t code_point) { return Range(code_point, code_point); }
  static CodePointSet Range(uint32_t first, uint32_t last);  // empty when first > last
  static CodePointSet All() { return Range(0, kMaxCodePoint); }

  CodePointSet& Add(const CodePointSet& other);
  // Every code point not in this set.
  CodePointSet Complement() const;

  bool empty() const { return ranges_.empty(); }
  bool Has(uint32_t code_point) const;
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  bool operator<(const CodePointSet& other) const { return ranges_ < other.ranges_; }

 private:
  void Normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// The byte sequences a JSON string writes one member of `set` as, one alternative per run of
// members that share a shape: ASCII as itself ('"' as \", '\' as \\), control characters as
// \u00XX (either case of hex digit) or their short escape (\n, \t, ...), others as UTF-8.
std::vector<GrammarSequence> JsonCharacterSequences(const CodePointSet& set);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_CODE_POINT_SET_H_
