#include "engine/json_number_range.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem::engine {
namespace {

using B = GrammarBuilder;

// Digit strings without leading zeros, compared as the integers they spell.
int CompareMagnitudes(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}

std::string Increment(std::string digits) {
  for (size_t i = digits.size(); i-- > 0;) {
    if (digits[i] != '9') {
      ++digits[i];
      return digits;
    }
    digits[i] = '0';
  }
  return "1" + digits;
}

// `digits` above "0".
std::string Decrement(std::string digits) {
  for (size_t i = digits.size(); i-- > 0;) {
    if (digits[i] != '0') {
      --digits[i];
      break;
    }
    digits[i] = '9';
  }
  const size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}

Decimal Integral(bool negative, std::string integer) {
  Decimal d;
  d.integer = std::move(integer);
  d.negative = negative && d.integer != "0";
  return d;
}

// The least integer at or above / the greatest at or below `d`.
Decimal Ceil(const Decimal& d) {
  if (d.fraction.empty()) return d;
  return d.negative ? Integral(true, d.integer) : Integral(false, Increment(d.integer));
}
Decimal Floor(const Decimal& d) {
  if (d.fraction.empty()) return d;
  return d.negative ? Integral(true, Increment(d.integer)) : Integral(false, d.integer);
}
// An integer plus or minus one.
Decimal PlusOne(const Decimal& d) {
  return d.negative ? Integral(true, Decrement(d.integer)) : Integral(false, Increment(d.integer));
}
Decimal MinusOne(const Decimal& d) {
  if (d.negative || d.is_zero()) return Integral(true, d.negative ? Increment(d.integer) : "1");
  return Integral(false, Decrement(d.integer));
}

Decimal Magnitude(const Decimal& d) {
  Decimal m = d;
  m.negative = false;
  return m;
}

// The rules of one NumberRangeRule call.
class RangeBuilder {
 public:
  RangeBuilder(B& b, std::string name) : b_(b), name_(std::move(name)) {}

  // Integers in [low, high], inclusive, either side open.
  std::optional<int32_t> Integers(const std::optional<Decimal>& low,
                                  const std::optional<Decimal>& high) {
    std::vector<GrammarSequence> alternatives;
    const Decimal zero;
    if (!high || !high->negative) {
      const Decimal from = low && !low->negative ? *low : zero;
      if (!high || CompareDecimals(from, *high) <= 0) {
        alternatives.push_back({B::Ref(Magnitudes(
            from.integer, high ? std::optional<std::string>(high->integer) : std::nullopt))});
      }
    }
    if (!low || low->negative) {
      const std::string from = high && high->negative ? high->integer : "1";
      const std::optional<std::string> to =
          low ? std::optional<std::string>(low->integer) : std::nullopt;
      if (!to || CompareMagnitudes(from, *to) <= 0) {
        alternatives.push_back({B::Bytes(ByteSet::Of('-')), B::Ref(Magnitudes(from, to))});
      }
    }
    if (alternatives.empty()) return std::nullopt;
    return b_.AddRule(name_, std::move(alternatives));
  }

  // Numbers within the bounds, with fractions.
  std::optional<int32_t> Numbers(const std::optional<NumberBound>& low,
                                 const std::optional<NumberBound>& high) {
    std::vector<GrammarSequence> alternatives;
    const NumberBound zero_inclusive{Decimal(), false};
    // Zero and above.
    const NumberBound from = low && !low->value.negative ? *low : zero_inclusive;
    if (std::optional<int32_t> rule = Nonnegative(from, high)) {
      alternatives.push_back({B::Ref(*rule)});
    }
    // Below zero: "-" and a magnitude above zero.
    if (!low || low->value.negative) {
      NumberBound above{Decimal(), true};
      if (high && high->value.negative) above = {Magnitude(high->value), high->exclusive};
      std::optional<NumberBound> below;
      if (low) below = NumberBound{Magnitude(low->value), low->exclusive};
      if (std::optional<int32_t> rule = Nonnegative(above, below)) {
        alternatives.push_back({B::Bytes(ByteSet::Of('-')), B::Ref(*rule)});
      }
    }
    if (alternatives.empty()) return std::nullopt;
    return b_.AddRule(name_, std::move(alternatives));
  }

 private:
  // Numbers at or above zero between `low` (not negative) and `high`.
  std::optional<int32_t> Nonnegative(const NumberBound& low,
                                     const std::optional<NumberBound>& high) {
    if (high) {
      const int order = CompareDecimals(low.value, high->value);
      if (order > 0 || (order == 0 && (low.exclusive || high->exclusive))) return std::nullopt;
      if (high->value.negative) return std::nullopt;
    }
    const std::string& low_integer = low.value.integer;
    std::vector<GrammarSequence> alternatives;
    auto add = [&](GrammarSequence integer, std::optional<int32_t> fraction) {
      if (!fraction) return;
      integer.push_back(B::Ref(*fraction));
      alternatives.push_back(std::move(integer));
    };
    if (high && high->value.integer == low_integer) {
      // One integer part: the fraction lies between both bounds'.
      add(B::Literal(low_integer), Fraction({low.value.fraction, low.exclusive, true},
                                            {high->value.fraction, high->exclusive, true}));
    } else {
      add(B::Literal(low_integer), Fraction({low.value.fraction, low.exclusive, true}, {}));
      // Integer parts strictly between the bounds', with any fraction.
      const std::string first = Increment(low_integer);
      std::optional<std::string> last;
      if (high) last = Decrement(high->value.integer);
      if (!last || CompareMagnitudes(first, *last) <= 0) {
        add({B::Ref(Magnitudes(first, last))}, Fraction({}, {}));
      }
      if (high) {
        add(B::Literal(high->value.integer),
            Fraction({}, {high->value.fraction, high->exclusive, true}));
      }
    }
    if (alternatives.empty()) return std::nullopt;
    return b_.AddRule(name_ + " magnitude", std::move(alternatives));
  }

  // One side of a fraction's comparison: the bound's fraction digits, whether equal is out, and
  // whether the side applies (an integer part equal to the bound's).
  struct FractionBound {
    std::string digits;
    bool exclusive = false;
    bool applies = false;
  };

  // What may follow an integer part: nothing or "." and digits, as a rule, such that the
  // fraction is at or above `low` and at or below `high` (where they apply); nullopt when no
  // fraction can. An automaton over (digits written, still equal to low's, still equal to
  // high's), a bound's digits past its end being zeros: one rule per state.
  std::optional<int32_t> Fraction(const FractionBound& low, const FractionBound& high) {
    const std::string lo = low.applies ? low.digits : "";
    const std::string hi = high.applies ? high.digits : "";
    const size_t m = std::max(lo.size(), hi.size());
    struct State {
      size_t i;
      bool tl, th;
    };
    auto id = [](const State& s) { return (s.i * 2 + s.tl) * 2 + s.th; };
    const size_t states = (m + 1) * 4;
    auto digit = [](const std::string& d, size_t i) { return i < d.size() ? d[i] : '0'; };
    // The fraction written so far, padded with zeros, compared with the bounds.
    auto accepts = [&](const State& s) {
      const bool above = !s.tl || (s.i >= lo.size() && !low.exclusive);
      const bool below = !s.th || !(high.exclusive && s.i >= hi.size());
      return above && below;
    };
    // (first digit, last digit, next state) of each run of digits leading to one state.
    auto moves = [&](const State& s) {
      std::vector<std::tuple<char, char, State>> out;
      const char from = s.tl ? digit(lo, s.i) : '0';
      const char to = s.th ? digit(hi, s.i) : '9';
      for (char c = from; c <= to; ++c) {
        const State next{std::min(s.i + 1, m), s.tl && c == digit(lo, s.i),
                         s.th && c == digit(hi, s.i)};
        if (!out.empty() && id(std::get<2>(out.back())) == id(next)) {
          std::get<1>(out.back()) = c;
        } else {
          out.emplace_back(c, c, next);
        }
      }
      return out;
    };
    // Which states can still end in an accepted fraction.
    std::vector<bool> live(states, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i <= m; ++i) {
        for (const bool tl : {false, true}) {
          for (const bool th : {false, true}) {
            const State s{i, tl, th};
            if (live[id(s)]) continue;
            bool alive = accepts(s);
            for (const auto& [a, z, next] : moves(s)) alive = alive || live[id(next)];
            if (alive) live[id(s)] = changed = true;
          }
        }
      }
    }
    const State start{0, low.applies, high.applies};
    std::map<size_t, int32_t> rules;
    std::function<int32_t(const State&)> rule = [&](const State& s) -> int32_t {
      if (auto it = rules.find(id(s)); it != rules.end()) return it->second;
      const int32_t r = b_.DeclareRule(name_ + " fraction digits");
      rules[id(s)] = r;  // before the moves: a state may lead to itself
      if (accepts(s)) b_.AddAlternative(r, {});
      for (const auto& [a, z, next] : moves(s)) {
        if (live[id(next)]) {
          b_.AddAlternative(r, {B::Bytes(ByteSet::Range(a, z)), B::Ref(rule(next))});
        }
      }
      return r;
    };
    std::vector<GrammarSequence> alternatives;
    if (accepts(start)) alternatives.push_back({});  // no fraction
    for (const auto& [a, z, next] : moves(start)) {
      if (live[id(next)]) {
        alternatives.push_back(
            {B::Bytes(ByteSet::Of('.')), B::Bytes(ByteSet::Range(a, z)), B::Ref(rule(next))});
      }
    }
    if (alternatives.empty()) return std::nullopt;
    return b_.AddRule(name_ + " fraction", std::move(alternatives));
  }

  // Integers written without leading zeros whose value lies in [low, high] (high open when
  // absent), low <= high: per digit count, the strings between that count's bounds.
  int32_t Magnitudes(const std::string& low, const std::optional<std::string>& high) {
    std::vector<GrammarSequence> alternatives;
    const size_t shortest = low.size();
    const size_t longest = high ? high->size() : shortest;
    for (size_t length = shortest; length <= longest; ++length) {
      const std::string from = length == shortest ? low : "1" + std::string(length - 1, '0');
      const std::string to = high && length == longest ? *high : std::string(length, '9');
      alternatives.push_back(Between(from, to));
    }
    if (!high) {
      // Longer than the low bound: above it, whatever the digits.
      alternatives.push_back(
          {B::Bytes(ByteSet::Range('1', '9')), B::Ref(AnyDigits(shortest)),
           B::Ref(b_.Star(name_ + " digits", {B::Bytes(ByteSet::Range('0', '9'))}))});
    }
    return b_.AddRule(name_ + " integer", std::move(alternatives));
  }

  // The digit strings of from's length between `from` and `to` (from <= to), as a sequence: the
  // shared prefix, then per position whether the digits so far still equal from's or to's.
  GrammarSequence Between(const std::string& from, const std::string& to) {
    std::map<std::tuple<size_t, bool, bool>, int32_t> rules;
    const size_t length = from.size();
    std::function<GrammarSequence(size_t, bool, bool)> rest = [&](size_t i, bool tl,
                                                                  bool th) -> GrammarSequence {
      if (i == length) return {};
      if (!tl && !th) return {B::Ref(AnyDigits(length - i))};
      const char a = tl ? from[i] : '0';
      const char z = th ? to[i] : '9';
      if (a == z) {  // one digit: no rule needed
        GrammarSequence seq = {B::Bytes(ByteSet::Of(static_cast<uint8_t>(a)))};
        GrammarSequence more = rest(i + 1, tl && a == from[i], th && a == to[i]);
        seq.insert(seq.end(), more.begin(), more.end());
        return seq;
      }
      auto key = std::make_tuple(i, tl, th);
      if (auto it = rules.find(key); it != rules.end()) return {B::Ref(it->second)};
      std::vector<GrammarSequence> alternatives;
      auto add = [&](char first, char last, bool next_tl, bool next_th) {
        if (first > last) return;
        GrammarSequence seq = {B::Bytes(ByteSet::Range(first, last))};
        GrammarSequence more = rest(i + 1, next_tl, next_th);
        seq.insert(seq.end(), more.begin(), more.end());
        alternatives.push_back(std::move(seq));
      };
      // a < z here: the low end, the middle, the high end.
      add(a, a, tl, false);
      add(static_cast<char>(a + 1), static_cast<char>(z - 1), false, false);
      add(z, z, false, th);
      const int32_t rule = b_.AddRule(name_ + " digits between", std::move(alternatives));
      rules[key] = rule;
      return {B::Ref(rule)};
    };
    return rest(0, true, true);
  }

  // Exactly `count` digits.
  int32_t AnyDigits(size_t count) {
    auto [it, added] = any_digits_.try_emplace(count, 0);
    if (added) {
      it->second = b_.Repeat(absl::StrCat(name_, " ", count, " digits"),
                             {B::Bytes(ByteSet::Range('0', '9'))}, static_cast<int32_t>(count),
                             static_cast<int32_t>(count));
    }
    return it->second;
  }

  B& b_;
  const std::string name_;
  std::map<size_t, int32_t> any_digits_;
};

}  // namespace

std::string Decimal::ToString() const {
  std::string out = negative ? "-" : "";
  out += integer;
  if (!fraction.empty()) absl::StrAppend(&out, ".", fraction);
  return out;
}

absl::StatusOr<Decimal> ParseDecimal(std::string_view text) {
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(text), "' ", why));
  };
  size_t at = 0;
  const bool negative = at < text.size() && text[at] == '-';
  if (negative) ++at;
  auto digits = [&]() {
    const size_t begin = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    return text.substr(begin, at - begin);
  };
  const std::string_view integer = digits();
  if (integer.empty()) return refuse("is not a number");
  std::string_view fraction;
  if (at < text.size() && text[at] == '.') {
    ++at;
    fraction = digits();
    if (fraction.empty()) return refuse("is not a number");
  }
  int64_t exponent = 0;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    bool minus = false;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) minus = text[at++] == '-';
    const std::string_view e = digits();
    if (e.empty()) return refuse("is not a number");
    for (const char c : e) {
      exponent = exponent * 10 + (c - '0');
      if (exponent > 100000) return refuse("has too large an exponent");
    }
    if (minus) exponent = -exponent;
  }
  if (at != text.size()) return refuse("is not a number");
  // All the digits, and where the point goes among them.
  std::string all = std::string(integer) + std::string(fraction);
  int64_t point = static_cast<int64_t>(integer.size()) + exponent;
  const size_t first = all.find_first_not_of('0');
  if (first == std::string::npos) return Decimal();  // zero, of either sign
  const size_t last = all.find_last_not_of('0');
  // The significant digits reach from `first` to `last`; so many digits must be written.
  const int64_t span = std::max<int64_t>(point, static_cast<int64_t>(last) + 1) -
                       std::min<int64_t>(point, static_cast<int64_t>(first));
  if (span > static_cast<int64_t>(kMaxBoundDigits)) {
    return refuse(absl::StrCat("needs more than ", kMaxBoundDigits, " digits"));
  }
  if (point < 0) {
    all.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<int64_t>(all.size())) all.append(point - all.size(), '0');
  Decimal d;
  std::string int_part = all.substr(0, point);
  std::string frac_part = all.substr(point);
  const size_t lead = int_part.find_first_not_of('0');
  d.integer = lead == std::string::npos ? "0" : int_part.substr(lead);
  const size_t trail = frac_part.find_last_not_of('0');
  d.fraction = trail == std::string::npos ? "" : frac_part.substr(0, trail + 1);
  d.negative = negative && !d.is_zero();
  return d;
}

int CompareDecimals(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int order = CompareMagnitudes(a.integer, b.integer);
  if (order == 0)
    order = a.fraction.compare(b.fraction) < 0 ? -1 : (a.fraction == b.fraction ? 0 : 1);
  return a.negative ? -order : order;
}

std::optional<int32_t> NumberRangeRule(GrammarBuilder& builder, const NumberRange& range,
                                       bool integer, const std::string& name) {
  RangeBuilder ranges(builder, name);
  if (!integer) return ranges.Numbers(range.low, range.high);
  std::optional<Decimal> low, high;
  if (range.low)
    low = range.low->exclusive ? PlusOne(Floor(range.low->value)) : Ceil(range.low->value);
  if (range.high) {
    high = range.high->exclusive ? MinusOne(Ceil(range.high->value)) : Floor(range.high->value);
  }
  if (low && high && CompareDecimals(*low, *high) > 0) return std::nullopt;
  return ranges.Integers(low, high);
}

}  // namespace tandem::engine
