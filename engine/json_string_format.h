// JSON Schema's string formats as grammar rules: the strings a rule derives are all valid in
// their format, so structured output can enforce `format` instead of refusing it. The formats are
// those OpenAI's strict structured outputs accept:
//
//   date        RFC 3339 full-date, with the days each month has (29 February in leap years only),
//               years 0001 to 9999
//   time        RFC 3339 full-time: HH:MM:SS, optional fraction, then Z or an offset
//   date-time   date "T" time
//   duration    RFC 3339 appendix A: P1Y2M3D, PT4H5M6S, P2W, ...
//   uuid        8-4-4-4-12 hexadecimal digits
//   ipv4        dotted quad, each part 0-255 without leading zeros
//   ipv6        RFC 4291's text forms, "::" and a trailing dotted quad included
//   hostname    RFC 1123 labels (letters, digits, inner hyphens) joined by dots
//   email       dot-atom@hostname (RFC 5322's common form, without quoted local parts or
//               address literals)
//
// Where a format allows more than a grammar can count cheaply, the rule allows a subset, so
// output stays valid: a hostname has at most 8 labels of at most 30 characters (at most 247 in
// all, under RFC 1123's 253), an email's local part at most 4 dot-separated atoms of at most 15
// characters (under RFC 5321's 64) and its domain at most 4 labels; letters in date-time are
// upper case; seconds stop at 59 (no leap second).
#ifndef TANDEM_ENGINE_JSON_STRING_FORMAT_H_
#define TANDEM_ENGINE_JSON_STRING_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar.h"

namespace tandem::engine {

// The formats StringFormatRule knows, in the order above.
const std::vector<std::string>& StringFormats();

// A rule deriving the JSON strings, quotes included, of values in `format`; nullopt when the
// format is not one of StringFormats(). (No character of these formats needs a JSON escape.)
std::optional<int32_t> StringFormatRule(GrammarBuilder& builder, std::string_view format);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_JSON_STRING_FORMAT_H_
