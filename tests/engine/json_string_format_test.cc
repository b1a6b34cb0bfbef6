// String formats in structured output (engine/json_string_format.h): each format admits the
// values its standard allows (within the documented limits) and refuses malformed ones, and
// random walks through each grammar give only strings that independent checks accept (a
// calendar for dates, inet_pton for IPv6, regular expressions for the rest).
#include "engine/json_string_format.h"

#include <arpa/inet.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

std::shared_ptr<const Grammar> FormatGrammar(const std::string& format) {
  absl::StatusOr<Grammar> grammar =
      JsonSchemaGrammar(absl::StrCat(R"({"type": "string", "format": ")", format, R"("})"));
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  return grammar.ok() ? std::make_shared<const Grammar>(*std::move(grammar)) : nullptr;
}

bool Admits(const std::shared_ptr<const Grammar>& grammar, const std::string& value) {
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  return m.ok() && m->Accept("\"" + value + "\"").ok() && m->complete();
}

bool LeapYear(int year) { return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0); }

bool ValidDate(const std::string& s) {
  static const std::regex kShape(R"((\d{4})-(\d{2})-(\d{2}))");
  std::smatch m;
  if (!std::regex_match(s, m, kShape)) return false;
  const int year = std::stoi(m[1]), month = std::stoi(m[2]), day = std::stoi(m[3]);
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return day <= kDays[month - 1] + (month == 2 && LeapYear(year) ? 1 : 0);
}

bool ValidTime(const std::string& s) {
  static const std::regex kTime(
      R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))");
  return std::regex_match(s, kTime);
}

bool ValidDateTime(const std::string& s) {
  const size_t t = s.find('T');
  return t != std::string::npos && ValidDate(s.substr(0, t)) && ValidTime(s.substr(t + 1));
}

bool ValidDuration(const std::string& s) {
  // RFC 3339 appendix A, written out as one expression.
  static const std::regex kDuration(
      R"(P(\d+W|(\d+D|\d+M(\d+D)?|\d+Y(\d+M(\d+D)?)?)(T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S))?)"
      R"(|T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)))");
  return std::regex_match(s, kDuration);
}

bool ValidUuid(const std::string& s) {
  static const std::regex kUuid(R"([0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})");
  return std::regex_match(s, kUuid);
}

bool ValidIpv4(const std::string& s) {
  std::vector<std::string> parts = absl::StrSplit(s, '.');
  if (parts.size() != 4) return false;
  for (const std::string& p : parts) {
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return false;
    if (p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) > 255) return false;
  }
  return true;
}

bool ValidIpv6(const std::string& s) {
  in6_addr address;
  return s.find_first_of("%") == std::string::npos && inet_pton(AF_INET6, s.c_str(), &address) == 1;
}

bool ValidHostname(const std::string& s) {
  static const std::regex kLabel(R"([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)");
  if (s.size() > 253) return false;
  for (const std::string& label : std::vector<std::string>(absl::StrSplit(s, '.'))) {
    if (label.size() > 63 || !std::regex_match(label, kLabel)) return false;
  }
  return true;
}

bool ValidEmail(const std::string& s) {
  static const std::regex kLocal(
      R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)");
  const size_t at = s.find('@');
  if (at == std::string::npos || at > 64) return false;
  return std::regex_match(s.substr(0, at), kLocal) && ValidHostname(s.substr(at + 1));
}

struct Case {
  std::string format;
  std::function<bool(const std::string&)> valid;
  std::vector<std::string> good, bad;
};

std::vector<Case> Cases() {
  return {
      {"date",
       ValidDate,
       {"2024-02-29", "2000-02-29", "1999-12-31", "0004-02-29", "2023-04-30", "2023-01-31",
        "0001-01-01"},
       {"0000-01-01", "0000-02-29", "2023-02-29", "1900-02-29", "2023-04-31", "2023-13-01",
        "2023-00-10", "2023-01-00", "23-01-01", "2023-1-01", "2023/01/01", "2023-02-30"}},
      {"time",
       ValidTime,
       {"00:00:00Z", "23:59:59Z", "12:30:00.123+05:30", "08:00:00-08:00"},
       {"24:00:00Z", "12:60:00Z", "12:00:60Z", "12:00:00", "12:00Z", "12:00:00+5:00",
        "12:00:00.Z"}},
      {"date-time",
       ValidDateTime,
       {"2024-02-29T23:59:59Z", "1970-01-01T00:00:00.5+01:00"},
       {"2024-02-29 23:59:59Z", "2023-02-29T00:00:00Z", "2024-01-01T00:00:00"}},
      {"duration",
       ValidDuration,
       {"P1D", "P3Y6M4DT12H30M5S", "PT36H", "P2W", "PT1M", "PT0S", "P1M2D", "P10Y"},
       {"P", "PT", "P1H", "P1Y2D", "P1W2D", "1D", "PT1H1S", "P1DT"}},
      {"uuid",
       ValidUuid,
       {"123e4567-e89b-12d3-a456-426614174000", "ABCDEFAB-CDEF-ABCD-EFAB-CDEFABCDEFAB"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
        "g23e4567-e89b-12d3-a456-426614174000"}},
      {"ipv4",
       ValidIpv4,
       {"0.0.0.0", "255.255.255.255", "192.168.1.10", "10.0.0.1"},
       {"256.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1..2.3", "1.2.3.-4"}},
      {"ipv6",
       ValidIpv6,
       {"::", "::1", "1::", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "::ffff:192.0.2.1",
        "fe80::1:2:3:4", "1:2:3:4:5:6:1.2.3.4", "1::8", "1:2:3:4:5:6:7::"},
       {":::", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "1:2:3:4:5:6:7", "::1.2.3",
        ":1:2:3:4:5:6:7", "g::"}},
      {"hostname",
       ValidHostname,
       {"localhost", "api.example.com", "my-service.default.svc.cluster.local", "a1", "x"},
       {"-a.com", "a-.com", "a..b", ".a", "a.", "a_b.com", "a b"}},
      {"email",
       ValidEmail,
       {"john.doe@example.com", "a@b", "o'brien+tag@mail.example.org", "x_y@host-1.io"},
       {"@example.com", "a@", "a..b@c.com", ".a@b.com", "a@-b.com", "a b@c.com", "a@b@c"}},
  };
}

TEST(JsonStringFormatTest, EachFormatAdmitsItsValuesAndRefusesOthers) {
  std::vector<std::string> seen;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.format);
    seen.push_back(c.format);
    auto grammar = FormatGrammar(c.format);
    ASSERT_NE(grammar, nullptr);
    for (const std::string& good : c.good) {
      EXPECT_TRUE(c.valid(good)) << "the check itself refuses " << good;
      EXPECT_TRUE(Admits(grammar, good)) << good;
    }
    for (const std::string& bad : c.bad) {
      EXPECT_FALSE(c.valid(bad)) << "the check itself accepts " << bad;
      EXPECT_FALSE(Admits(grammar, bad)) << bad;
    }
  }
  EXPECT_EQ(seen, StringFormats());
}

// Random walks: a uniformly chosen allowed byte at a time until the string is whole.
TEST(JsonStringFormatTest, RandomValuesOfEachFormatAreValid) {
  std::mt19937 rng(11);
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.format);
    auto grammar = FormatGrammar(c.format);
    ASSERT_NE(grammar, nullptr);
    for (int walk = 0; walk < 150; ++walk) {
      absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
      ASSERT_TRUE(m.ok());
      std::string text;
      while (!m->complete()) {
        std::vector<uint8_t> next;
        for (int b = 0; b < 256; ++b) {
          if (m->Allows(m->state(), static_cast<uint8_t>(b)))
            next.push_back(static_cast<uint8_t>(b));
        }
        ASSERT_FALSE(next.empty()) << "stuck after " << text;
        // Whitespace may only lead: skip it, and end strings sooner by favouring the quote.
        next.erase(std::remove_if(next.begin(), next.end(),
                                  [](uint8_t b) { return b == ' ' || b == '\n'; }),
                   next.end());
        char byte = static_cast<char>(next[rng() % next.size()]);
        if (text.size() > 1 && m->Allows(m->state(), '"') && rng() % 8 == 0) byte = '"';
        ASSERT_TRUE(m->Accept(std::string_view(&byte, 1)).ok());
        text += byte;
      }
      ASSERT_GE(text.size(), 2u);
      const std::string value = text.substr(1, text.size() - 2);
      EXPECT_TRUE(c.valid(value)) << value;
    }
  }
}

TEST(JsonStringFormatTest, UnknownFormatsAndLengthsBesideAFormatAreRefused) {
  absl::Status unknown = JsonSchemaGrammar(R"({"type": "string", "format": "uri"})").status();
  EXPECT_EQ(unknown.message(),
            "json_schema at #/format: 'uri' is not supported (supported: date, time, date-time, "
            "duration, uuid, ipv4, ipv6, hostname, email)");
  EXPECT_EQ(JsonSchemaGrammar(R"({"format": "date", "maxLength": 5})").status().message(),
            "json_schema at #: 'maxLength' beside 'format' is not supported");
  EXPECT_EQ(JsonSchemaGrammar(R"({"type": "string", "format": 1})").status().message(),
            "json_schema at #/format: must be a string");
  // Beside another type the format binds strings only; alone it implies a string.
  absl::StatusOr<Grammar> either =
      JsonSchemaGrammar(R"({"type": ["string", "null"], "format": "uuid"})");
  ASSERT_TRUE(either.ok()) << either.status();
  auto grammar = std::make_shared<const Grammar>(*std::move(either));
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  ASSERT_TRUE(m.ok() && m->Accept("null").ok() && m->complete());
  EXPECT_FALSE(Admits(grammar, "x"));
  EXPECT_FALSE(Admits(FormatGrammar("date"), "")) << "an empty string is no date";
}

}  // namespace
}  // namespace tandem::engine
