// Numbers between bounds (JSON Schema's minimum, maximum, exclusiveMinimum, exclusiveMaximum) as
// grammar rules, exactly: a number the rule derives is within the bounds, and every number within
// them can be written in a form it derives.
//
// Bounds are compared as the exact decimals their JSON text spells (0.1 is one tenth, not the
// double nearest it), with arbitrary-length digit strings, so any bound the schema can write is
// honoured to the last digit. A bounded number is written without an exponent (-?int(.digits)?,
// trailing zeros allowed, never "-0"): every value has such a form, and digit-by-digit
// comparison with the bounds then stays a small automaton (per fraction position, whether the
// digits so far still equal each bound's).
#ifndef TANDEM_ENGINE_JSON_NUMBER_RANGE_H_
#define TANDEM_ENGINE_JSON_NUMBER_RANGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar.h"

namespace tandem::engine {

// An exact decimal: integer digits without leading zeros ("0" when there are none), fraction
// digits without trailing zeros. Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string integer = "0";
  std::string fraction;

  bool is_zero() const { return integer == "0" && fraction.empty(); }
  std::string ToString() const;
};

// Digits a bound may take (integer and fraction together, after its exponent is applied).
inline constexpr size_t kMaxBoundDigits = 64;

// The decimal a JSON number's text spells ("-1.25e2" is -125). INVALID_ARGUMENT when the text is
// not a JSON number or its value needs more than kMaxBoundDigits digits.
absl::StatusOr<Decimal> ParseDecimal(std::string_view text);

// <0, 0 or >0 as a is below, equal to or above b.
int CompareDecimals(const Decimal& a, const Decimal& b);

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

// Either side may be open.
struct NumberRange {
  std::optional<NumberBound> low, high;
};

// A rule deriving the JSON numbers within `range` (only integers when `integer`), or nullopt when
// no such number exists.
std::optional<int32_t> NumberRangeRule(GrammarBuilder& builder, const NumberRange& range,
                                       bool integer, const std::string& name);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_JSON_NUMBER_RANGE_H_
