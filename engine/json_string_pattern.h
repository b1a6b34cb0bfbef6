// JSON Schema's `pattern` as a grammar rule: the JSON strings whose text the regular expression
// matches. As JSON Schema says, the expression is ECMA-262's and matches anywhere in the string
// unless anchored: "^a" is a string that starts with a, "a" one that contains it.
//
// Supported: literals (UTF-8 in the pattern, \n \t \r \f \v \0 \xHH \uHHHH, escaped
// punctuation), `.`, classes ([a-z], [^"\\], \d \w \s and their negations, inside classes too),
// groups ((...), (?:...), (?<name>...)), alternation, the quantifiers * + ? {n} {n,} {n,m} (m at
// most 1000; a lazy `?` after them matches the same strings), and ^ / $ at the start / end of
// the pattern or of one of its top-level alternatives.
//
// Refused with the character where the pattern says it: backreferences, lookahead and
// lookbehind, word boundaries, \p{...}, other escaped letters, anchors elsewhere, \u{...} and
// \cX, classes that match nothing, and an unbounded repetition of something that can match the
// empty string ((a?)*), which a grammar cannot run without looping.
#ifndef TANDEM_ENGINE_JSON_STRING_PATTERN_H_
#define TANDEM_ENGINE_JSON_STRING_PATTERN_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar.h"

namespace tandem::engine {

// The largest count a {n,m} quantifier may give: repetition costs rules in proportion to it.
inline constexpr int32_t kMaxPatternRepeat = 1000;

// A rule deriving the JSON strings, quotes included, whose text `pattern` matches.
// INVALID_ARGUMENT ("at character N: ...") for what is refused above or malformed.
absl::StatusOr<int32_t> StringPatternRule(GrammarBuilder& builder, std::string_view pattern);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_JSON_STRING_PATTERN_H_
