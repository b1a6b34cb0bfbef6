// Numbers between bounds (engine/json_number_range.h): exact decimals from JSON text, and rules
// that, for every pair of bounds drawn from a set (open, inclusive or exclusive, integer or
// number), derive exactly the numbers within them, checked against exact arithmetic on every
// candidate near each bound.
#include "engine/json_number_range.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/grammar_matcher.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

TEST(DecimalTest, JsonNumbersAreReadExactly) {
  auto text = [](std::string_view number) {
    absl::StatusOr<Decimal> d = ParseDecimal(number);
    return d.ok() ? d->ToString() : std::string(d.status().message());
  };
  EXPECT_EQ(text("0"), "0");
  EXPECT_EQ(text("-0"), "0");
  EXPECT_EQ(text("-0.000"), "0");
  EXPECT_EQ(text("12"), "12");
  EXPECT_EQ(text("-12.500"), "-12.5");
  EXPECT_EQ(text("0.1"), "0.1");
  EXPECT_EQ(text("1e+30"), "1000000000000000000000000000000");
  EXPECT_EQ(text("1.5e-07"), "0.00000015");
  EXPECT_EQ(text("-2.5E2"), "-250");
  EXPECT_EQ(text("123.456e1"), "1234.56");
  EXPECT_EQ(text("00012.0"), "12");
  EXPECT_EQ(text("1e-70"), "'1e-70' needs more than 64 digits");
  EXPECT_EQ(text("1e99999999"), "'1e99999999' has too large an exponent");
  for (const char* bad : {"", "-", "1.", ".5", "1e", "1x", "null", "--1"}) {
    EXPECT_FALSE(ParseDecimal(bad).ok()) << bad;
  }

  auto compare = [](std::string_view a, std::string_view b) {
    return CompareDecimals(*ParseDecimal(a), *ParseDecimal(b));
  };
  EXPECT_LT(compare("0.5", "0.51"), 0);
  EXPECT_GT(compare("0.6", "0.51"), 0);
  EXPECT_LT(compare("-3", "-2.5"), 0);
  EXPECT_LT(compare("-0.1", "0"), 0);
  EXPECT_EQ(compare("10", "1e1"), 0);
  EXPECT_LT(compare("99", "100"), 0);
}

// Values in thousandths, so that bounds and candidates compare exactly.
std::string Text(int64_t thousandths) {
  const bool negative = thousandths < 0;
  const int64_t magnitude = negative ? -thousandths : thousandths;
  std::string out = absl::StrCat(negative ? "-" : "", magnitude / 1000);
  int64_t fraction = magnitude % 1000;
  if (fraction != 0) {
    std::string digits = absl::StrCat(1000 + fraction).substr(1);
    while (digits.back() == '0') digits.pop_back();
    absl::StrAppend(&out, ".", digits);
  }
  return out;
}

struct Side {
  int64_t value;
  bool exclusive;
};

bool Within(int64_t v, const std::optional<Side>& low, const std::optional<Side>& high) {
  if (low && (low->exclusive ? v <= low->value : v < low->value)) return false;
  if (high && (high->exclusive ? v >= high->value : v > high->value)) return false;
  return true;
}

std::optional<NumberBound> Bound(const std::optional<Side>& side) {
  if (!side) return std::nullopt;
  return NumberBound{*ParseDecimal(Text(side->value)), side->exclusive};
}

bool Accepts(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  return m.ok() && m->Accept(text).ok() && m->complete();
}

TEST(NumberRangeTest, EveryPairOfBoundsAdmitsExactlyTheNumbersBetweenThem) {
  const std::vector<int64_t> bounds = {-12500, -10000, -2750, -500,  0,
                                       50,     1000,   9990,  10000, 100000};
  // Every bound, a thousandth, a hundredth and one either side, and a few values between.
  std::set<int64_t> values = {-150000, -7250, -3000, 250, 3500, 42000, 250000};
  for (const int64_t b : bounds) {
    for (const int64_t d : {0, 1, 10, 1000}) {
      values.insert(b - d);
      values.insert(b + d);
    }
  }
  std::vector<std::optional<Side>> sides = {std::nullopt};
  for (const int64_t b : bounds) {
    sides.push_back(Side{b, false});
    sides.push_back(Side{b, true});
  }
  int grammars = 0;
  for (const bool integer : {false, true}) {
    for (const auto& low : sides) {
      for (const auto& high : sides) {
        SCOPED_TRACE(absl::StrCat(
            integer ? "integer" : "number", " low ",
            low ? absl::StrCat(low->exclusive ? ">" : ">=", Text(low->value)) : "open", " high ",
            high ? absl::StrCat(high->exclusive ? "<" : "<=", Text(high->value)) : "open"));
        bool any = false;
        for (const int64_t v : values)
          any = any || (Within(v, low, high) && (!integer || v % 1000 == 0));
        GrammarBuilder builder;
        const std::optional<int32_t> rule =
            NumberRangeRule(builder, NumberRange{Bound(low), Bound(high)}, integer, "n");
        if (!rule) {
          // Only an empty range has no rule (no candidate may lie within it).
          EXPECT_FALSE(any);
          continue;
        }
        absl::StatusOr<Grammar> built = builder.Build(*rule);
        ASSERT_TRUE(built.ok()) << built.status();
        auto grammar = std::make_shared<const Grammar>(*std::move(built));
        ++grammars;
        for (const int64_t v : values) {
          const std::string text = Text(v);
          const bool whole = v % 1000 == 0;
          EXPECT_EQ(Accepts(grammar, text), Within(v, low, high) && (!integer || whole)) << text;
          // Trailing zeros are the same number; integers take no fraction at all.
          const std::string padded = whole ? text + ".00" : text + "0";
          EXPECT_EQ(Accepts(grammar, padded), Within(v, low, high) && !integer) << padded;
        }
        // Forms that are not JSON, or not the form bounded numbers take.
        for (const char* never : {"-0", "01", "1e1", "+1", "1.", ".5", "-", "", "0.5e0", "- 1"}) {
          EXPECT_FALSE(Accepts(grammar, never)) << never;
        }
      }
    }
  }
  EXPECT_GT(grammars, 400);  // about half the pairs are empty ranges
}

TEST(NumberRangeTest, LongBoundsAreComparedToTheLastDigit) {
  NumberRange range{
      NumberBound{*ParseDecimal("123456789012345678901234567890"), false},
      NumberBound{*ParseDecimal("123456789012345678901234567890.000000000001"), true}};
  GrammarBuilder builder;
  std::optional<int32_t> rule = NumberRangeRule(builder, range, false, "n");
  ASSERT_TRUE(rule.has_value());
  auto grammar = std::make_shared<const Grammar>(*builder.Build(*rule));
  EXPECT_TRUE(Accepts(grammar, "123456789012345678901234567890"));
  EXPECT_TRUE(Accepts(grammar, "123456789012345678901234567890.0000000000009999"));
  EXPECT_FALSE(Accepts(grammar, "123456789012345678901234567890.000000000001"));
  EXPECT_FALSE(Accepts(grammar, "123456789012345678901234567891"));
  EXPECT_FALSE(Accepts(grammar, "123456789012345678901234567889.9"));

  // The one integer between them, and none when the bounds exclude it.
  GrammarBuilder integers;
  rule = NumberRangeRule(integers, range, true, "n");
  ASSERT_TRUE(rule.has_value());
  auto one = std::make_shared<const Grammar>(*integers.Build(*rule));
  EXPECT_TRUE(Accepts(one, "123456789012345678901234567890"));
  EXPECT_FALSE(Accepts(one, "123456789012345678901234567891"));
  range.low->exclusive = true;
  GrammarBuilder none;
  EXPECT_FALSE(NumberRangeRule(none, range, true, "n").has_value());
}

}  // namespace
}  // namespace tandem::engine
