#include "engine/json_string_format.h"

#include <initializer_list>
#include <utility>

namespace tandem::engine {
namespace {

using B = GrammarBuilder;
using Seq = GrammarSequence;

ByteSet Range(char first, char last) {
  return ByteSet::Range(static_cast<uint8_t>(first), static_cast<uint8_t>(last));
}

ByteSet Chars(std::string_view chars) {
  ByteSet set;
  for (const char c : chars) set.Add(ByteSet::Of(static_cast<uint8_t>(c)));
  return set;
}

GrammarSymbol In(const ByteSet& set) { return B::Bytes(set); }
GrammarSymbol In(char first, char last) { return B::Bytes(Range(first, last)); }
GrammarSymbol In(std::string_view chars) { return B::Bytes(Chars(chars)); }
GrammarSymbol Is(char c) { return B::Bytes(ByteSet::Of(static_cast<uint8_t>(c))); }

// The sequences one after the other.
Seq Cat(std::initializer_list<Seq> parts) {
  Seq out;
  for (const Seq& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// `sequence` `count` times over.
Seq Times(const Seq& sequence, int count) {
  Seq out;
  for (int i = 0; i < count; ++i) out.insert(out.end(), sequence.begin(), sequence.end());
  return out;
}

class FormatRules {
 public:
  explicit FormatRules(B& b) : b_(b) {}

  int32_t Date() {
    const GrammarSymbol digit = In('0', '9');
    const int32_t d31 =
        b_.AddRule("day of 31", {{Is('0'), In('1', '9')}, {In("12"), digit}, {Is('3'), In("01")}});
    const int32_t d30 =
        b_.AddRule("day of 30", {{Is('0'), In('1', '9')}, {In("12"), digit}, B::Literal("30")});
    const int32_t d28 = b_.AddRule(
        "day of 28", {{Is('0'), In('1', '9')}, {Is('1'), digit}, {Is('2'), In('0', '8')}});
    const int32_t month_day =
        b_.AddRule("month and day", {{Is('0'), In("13578"), Is('-'), B::Ref(d31)},
                                     {Is('1'), In("02"), Is('-'), B::Ref(d31)},
                                     {Is('0'), In("469"), Is('-'), B::Ref(d30)},
                                     Cat({B::Literal("11-"), {B::Ref(d30)}}),
                                     Cat({B::Literal("02-"), {B::Ref(d28)}})});
    // Years 0001 to 9999 (Python's and most libraries' dates have no year 0).
    const int32_t year = b_.AddRule("year", {{In('1', '9'), digit, digit, digit},
                                             {Is('0'), In('1', '9'), digit, digit},
                                             {Is('0'), Is('0'), In('1', '9'), digit},
                                             {Is('0'), Is('0'), Is('0'), In('1', '9')}});
    // Two digits that are a multiple of 4 other than 00: an even tens digit with 0, 4 or 8 (0
    // with 4 or 8), an odd one with 2 or 6. A leap year: such a pair at the end, or 00 after one.
    const int32_t by_four =
        b_.AddRule("multiple of 4, not 00",
                   {{Is('0'), In("48")}, {In("2468"), In("048")}, {In("13579"), In("26")}});
    const int32_t leap_year = b_.AddRule(
        "leap year", {{digit, digit, B::Ref(by_four)}, Cat({{B::Ref(by_four)}, B::Literal("00")})});
    return b_.AddRule("date", {{B::Ref(year), Is('-'), B::Ref(month_day)},
                               Cat({{B::Ref(leap_year)}, B::Literal("-02-29")})});
  }

  int32_t Time() {
    const GrammarSymbol digit = In('0', '9');
    const int32_t hour = b_.AddRule("hour", {{In("01"), digit}, {Is('2'), In('0', '3')}});
    const Seq sixty = {In('0', '5'), digit};
    const int32_t fraction =
        b_.Optional("fraction of a second", {Is('.'), digit, B::Ref(b_.Star("digits", {digit}))});
    const int32_t offset =
        b_.AddRule("offset", {{Is('Z')}, Cat({{In("+-"), B::Ref(hour), Is(':')}, sixty})});
    return b_.AddRule("time", {Cat({{B::Ref(hour), Is(':')},
                                    sixty,
                                    {Is(':')},
                                    sixty,
                                    {B::Ref(fraction), B::Ref(offset)}})});
  }

  int32_t DateTime() {
    const int32_t date = Date();
    const int32_t time = Time();
    return b_.AddRule("date-time", {{B::Ref(date), Is('T'), B::Ref(time)}});
  }

  int32_t Duration() {
    const GrammarSymbol digit = In('0', '9');
    const Seq number = {digit, B::Ref(b_.Star("digits", {digit}))};
    auto unit = [&](char letter, std::optional<int32_t> then) {
      Seq s = Cat({number, {Is(letter)}});
      if (then) s.push_back(B::Ref(b_.Optional(std::string(1, letter) + " then", {B::Ref(*then)})));
      return b_.AddRule(std::string(1, letter), {std::move(s)});
    };
    const int32_t second = unit('S', std::nullopt);
    const int32_t minute = unit('M', second);
    const int32_t hour = unit('H', minute);
    const int32_t time =
        b_.AddRule("duration time",
                   {{Is('T'), B::Ref(hour)}, {Is('T'), B::Ref(minute)}, {Is('T'), B::Ref(second)}});
    const int32_t day = unit('D', std::nullopt);
    const int32_t month = unit('M', day);
    const int32_t year = unit('Y', month);
    const int32_t maybe_time = b_.Optional("duration time?", {B::Ref(time)});
    const int32_t date = b_.AddRule("duration date", {{B::Ref(day), B::Ref(maybe_time)},
                                                      {B::Ref(month), B::Ref(maybe_time)},
                                                      {B::Ref(year), B::Ref(maybe_time)}});
    const int32_t week = unit('W', std::nullopt);
    return b_.AddRule("duration",
                      {{Is('P'), B::Ref(date)}, {Is('P'), B::Ref(time)}, {Is('P'), B::Ref(week)}});
  }

  int32_t Uuid() {
    const Seq hex = {Hex()};
    return b_.AddRule("uuid", {Cat({Times(hex, 8),
                                    {Is('-')},
                                    Times(hex, 4),
                                    {Is('-')},
                                    Times(hex, 4),
                                    {Is('-')},
                                    Times(hex, 4),
                                    {Is('-')},
                                    Times(hex, 12)})});
  }

  int32_t Ipv4() {
    const GrammarSymbol digit = In('0', '9');
    const int32_t octet = b_.AddRule("0 to 255", {Cat({B::Literal("25"), {In('0', '5')}}),
                                                  {Is('2'), In('0', '4'), digit},
                                                  {Is('1'), digit, digit},
                                                  {In('1', '9'), digit},
                                                  {digit}});
    const Seq dot_octet = {Is('.'), B::Ref(octet)};
    return b_.AddRule("ipv4", {Cat({{B::Ref(octet)}, dot_octet, dot_octet, dot_octet})});
  }

  // RFC 3986's IPv6address, one alternative per place of the "::".
  int32_t Ipv6() {
    const int32_t h16 = b_.Repeat("h16", {Hex()}, 1, 4);
    const int32_t h16_colon = b_.AddRule("h16:", {{B::Ref(h16), Is(':')}});
    const int32_t ipv4 = Ipv4();
    const int32_t ls32 = b_.AddRule("ls32", {{B::Ref(h16), Is(':'), B::Ref(h16)}, {B::Ref(ipv4)}});
    auto pieces = [&](int count) {  // count × "h16:"
      return b_.Repeat("h16: pieces", {B::Ref(h16_colon)}, count, count);
    };
    std::vector<Seq> alternatives = {{B::Ref(pieces(6)), B::Ref(ls32)}};
    // Before "::", up to `before` pieces; after it, what is left of the eight.
    const std::vector<Seq> after = {{B::Ref(pieces(5)), B::Ref(ls32)},
                                    {B::Ref(pieces(4)), B::Ref(ls32)},
                                    {B::Ref(pieces(3)), B::Ref(ls32)},
                                    {B::Ref(pieces(2)), B::Ref(ls32)},
                                    {B::Ref(h16_colon), B::Ref(ls32)},
                                    {B::Ref(ls32)},
                                    {B::Ref(h16)},
                                    {}};
    for (size_t i = 0; i < after.size(); ++i) {
      Seq alternative;
      if (i > 0) {
        const int32_t more =
            b_.Repeat("h16: before ::", {B::Ref(h16_colon)}, 0, static_cast<int32_t>(i) - 1);
        alternative.push_back(B::Ref(b_.Optional("before ::", {B::Ref(more), B::Ref(h16)})));
      }
      alternative.push_back(Is(':'));
      alternative.push_back(Is(':'));
      alternative.insert(alternative.end(), after[i].begin(), after[i].end());
      alternatives.push_back(std::move(alternative));
    }
    return b_.AddRule("ipv6", std::move(alternatives));
  }

  // At most `labels` labels of at most `label_length` characters, joined by dots.
  int32_t Hostname(int32_t labels, int32_t label_length) {
    const ByteSet alnum = Range('a', 'z').Add(Range('A', 'Z')).Add(Range('0', '9'));
    const ByteSet inner = ByteSet(alnum).Add(ByteSet::Of('-'));
    const int32_t middle = b_.Repeat("label middle", {In(inner)}, 0, label_length - 2);
    const int32_t label =
        b_.AddRule("label", {{In(alnum)}, {In(alnum), B::Ref(middle), In(alnum)}});
    const int32_t more = b_.Repeat("more labels", {Is('.'), B::Ref(label)}, 0, labels - 1);
    return b_.AddRule("hostname", {{B::Ref(label), B::Ref(more)}});
  }

  int32_t Email() {
    const ByteSet atext =
        Range('a', 'z').Add(Range('A', 'Z')).Add(Range('0', '9')).Add(Chars("!#$%&'*+/=?^_`{|}~-"));
    const int32_t atom = b_.Repeat("atom", {In(atext)}, 1, 15);
    const int32_t more = b_.Repeat("more atoms", {Is('.'), B::Ref(atom)}, 0, 3);
    return b_.AddRule("email", {{B::Ref(atom), B::Ref(more), Is('@'), B::Ref(Hostname(4, 30))}});
  }

 private:
  static GrammarSymbol Hex() {
    return In(Range('0', '9').Add(Range('a', 'f')).Add(Range('A', 'F')));
  }

  B& b_;
};

}  // namespace

namespace {

// Each format and how its body is built: StringFormats() and StringFormatRule() read this one
// list.
struct FormatEntry {
  const char* name;
  int32_t (*body)(FormatRules&);
};
constexpr FormatEntry kFormats[] = {
    {"date", [](FormatRules& r) { return r.Date(); }},
    {"time", [](FormatRules& r) { return r.Time(); }},
    {"date-time", [](FormatRules& r) { return r.DateTime(); }},
    {"duration", [](FormatRules& r) { return r.Duration(); }},
    {"uuid", [](FormatRules& r) { return r.Uuid(); }},
    {"ipv4", [](FormatRules& r) { return r.Ipv4(); }},
    {"ipv6", [](FormatRules& r) { return r.Ipv6(); }},
    {"hostname", [](FormatRules& r) { return r.Hostname(8, 30); }},
    {"email", [](FormatRules& r) { return r.Email(); }},
};

}  // namespace

const std::vector<std::string>& StringFormats() {
  static const auto* const kNames = [] {
    auto* names = new std::vector<std::string>;
    for (const FormatEntry& entry : kFormats) names->push_back(entry.name);
    return names;
  }();
  return *kNames;
}

std::optional<int32_t> StringFormatRule(GrammarBuilder& builder, std::string_view format) {
  const FormatEntry* entry = nullptr;
  for (const FormatEntry& e : kFormats) {
    if (format == e.name) entry = &e;
  }
  if (entry == nullptr) return std::nullopt;
  FormatRules rules(builder);
  const int32_t body = entry->body(rules);
  return builder.AddRule(std::string(format), {{Is('"'), B::Ref(body), Is('"')}});
}

}  // namespace tandem::engine
