// `pattern` in structured output (engine/json_string_pattern.h, engine/code_point_set.h): JSON
// strings whose text an ECMA-262 expression matches anywhere unless anchored, with the escapes a
// JSON string needs; random walks checked against std::regex (ECMAScript); and refusals that
// name the character.
#include "engine/json_string_pattern.h"

#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/code_point_set.h"
#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {
namespace {

std::shared_ptr<const Grammar> PatternGrammar(const std::string& pattern) {
  const nlohmann::json schema = {{"type", "string"}, {"pattern", pattern}};
  absl::StatusOr<Grammar> grammar = JsonSchemaGrammar(schema.dump());
  EXPECT_TRUE(grammar.ok()) << pattern << ": " << grammar.status();
  return grammar.ok() ? std::make_shared<const Grammar>(*std::move(grammar)) : nullptr;
}

// Whether the grammar takes `json_text` (a JSON string literal, quotes included) whole.
bool Takes(const std::shared_ptr<const Grammar>& grammar, const std::string& json_text) {
  if (grammar == nullptr) return false;
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  return m.ok() && m->Accept(json_text).ok() && m->complete();
}

// `value` as JSON writes it.
bool Admits(const std::shared_ptr<const Grammar>& grammar, const std::string& value) {
  return Takes(grammar, nlohmann::json(value).dump());
}

TEST(JsonStringPatternTest, MatchesAnywhereUnlessAnchored) {
  struct Case {
    std::string pattern;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {"^[a-z]+$", {"abc", "z"}, {"", "aBc", "ab1", " abc"}},
      {R"(\d{3}-\d{4})", {"555-1234", "call 555-1234 now"}, {"55-1234", "5551234", ""}},
      {"^(foo|bar)baz$", {"foobaz", "barbaz"}, {"baz", "foobarbaz", "foobaz!"}},
      {"^a|b$", {"ax", "xb", "ab", "b"}, {"xa", "bx", ""}},
      {"colou?r", {"color", "my colour"}, {"colr", "colouur"}},
      {R"(^\w+@\w+\.com$)", {"me@site.com"}, {"me@site.org", "me@site,com", "@site.com"}},
      {"^[^\"]*$", {"", "no quotes"}, {"a\"b"}},
      {"^a\"b\\\\c$", {"a\"b\\c"}, {"a\"bc", "ab\\c"}},
      {R"(^\n\t$)", {"\n\t"}, {"n\t", "\n"}},
      {"^é+$", {"é", "éé"}, {"e", "éa"}},
      {"^[α-ω]{2}$", {"βγ", "αω"}, {"ab", "β", "βγδ"}},
      {"^.$", {"a", "€", "\xF0\x9F\x98\x80"}, {"", "ab", "\n"}},
      {R"(^\u00e9\x41$)", {"éA"}, {"eA"}},
      {R"(^[\d\s]+$)", {"1 2\t3", "\xE2\x80\xA8"}, {"1a"}},
      {"^a{2,3}$", {"aa", "aaa"}, {"a", "aaaa"}},
      {"^(?:ab){2,}$", {"abab", "ababab"}, {"ab", "aba"}},
      {"^(?<year>\\d{4})-x*?$", {"2024-", "2024-xx"}, {"202-"}},
      {"^[-a]b{1}c{0}$", {"-b", "ab"}, {"b", "abc"}},
      {"^x{,3}$", {"x{,3}"}, {"xxx"}},  // not a quantifier: text
      {"", {"", "anything"}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    auto grammar = PatternGrammar(c.pattern);
    ASSERT_NE(grammar, nullptr);
    for (const std::string& s : c.yes) EXPECT_TRUE(Admits(grammar, s)) << s;
    for (const std::string& s : c.no) EXPECT_FALSE(Admits(grammar, s)) << s;
  }
  // Control characters may be written either way JSON allows.
  auto newline = PatternGrammar("^\\n$");
  EXPECT_TRUE(Takes(newline, R"("\n")"));
  EXPECT_TRUE(Takes(newline, R"("\u000a")"));
  EXPECT_TRUE(Takes(newline, R"("\u000A")"));
  EXPECT_FALSE(Takes(newline, "\"\n\""));  // raw in a JSON string: not JSON
}

TEST(JsonStringPatternTest, WhatCannotBeEnforcedIsRefusedAtItsCharacter) {
  auto refusal = [](const std::string& pattern) {
    GrammarBuilder builder;
    absl::StatusOr<int32_t> rule = StringPatternRule(builder, pattern);
    return rule.ok() ? std::string("ok") : std::string(rule.status().message());
  };
  EXPECT_EQ(refusal(R"((a)\1)"), "at character 4: backreferences are not supported");
  EXPECT_EQ(refusal("(?=a)b"), "at character 3: lookahead is not supported");
  EXPECT_EQ(refusal("(?<!a)b"), "at character 4: lookbehind is not supported");
  EXPECT_EQ(refusal(R"(\bword)"), "at character 1: word boundaries (\\b) are not supported");
  EXPECT_EQ(refusal("a^b"), "at character 2: '^' is supported only at the start of the pattern");
  EXPECT_EQ(refusal("a$b"), "at character 2: '$' is supported only at the end of the pattern");
  EXPECT_EQ(refusal("(a$)"), "at character 3: '$' is supported only at the end of the pattern");
  EXPECT_EQ(refusal("(a?)*"),
            "at character 5: an unbounded repetition of something that can match the empty "
            "string (such as (a?)*) is not supported");
  EXPECT_EQ(refusal("[z-a]"), "at character 2: range out of order in character class");
  EXPECT_EQ(refusal("a{5,2}"), "at character 2: numbers out of order in {} quantifier");
  EXPECT_EQ(refusal("a{2000}"), "at character 2: a count above 1000 is not supported");
  EXPECT_EQ(refusal("[]"), "at character 1: the character class matches nothing");
  EXPECT_EQ(refusal("é("), "at character 3: missing ')'");  // characters, not bytes
  EXPECT_EQ(refusal(R"(^\p{L}+$)"),
            "at character 2: Unicode property escapes (\\p{...}) are not supported");
  EXPECT_EQ(refusal(R"(\A)"), "at character 1: unknown escape \\A");
  EXPECT_EQ(refusal("{2000}"), "at character 1: nothing to repeat");
  EXPECT_EQ(refusal("x|{5,2}"), "at character 3: nothing to repeat");
  EXPECT_EQ(refusal("(?<a)|(?<b>c)"),
            "at character 5: a group name is letters, digits, '_' or '$', then '>'");
  EXPECT_EQ(refusal("a**"), "at character 3: nothing to repeat");
  EXPECT_EQ(refusal("*a"), "at character 1: nothing to repeat");
  EXPECT_EQ(refusal("(ab"), "at character 4: missing ')'");
  EXPECT_EQ(refusal("ab)"), "at character 3: unmatched ')'");
  EXPECT_EQ(refusal("[ab"), "at character 4: missing ']'");
  EXPECT_EQ(refusal(R"(\u{1F600})"), "at character 1: \\u{...} is not supported; write \\uHHHH");
  EXPECT_EQ(refusal("a\\"), "at character 3: a pattern cannot end with a backslash");
  EXPECT_EQ(refusal("\xC3"), "at character 1: not valid UTF-8");
  EXPECT_EQ(refusal("(a|b)*c"), "ok");
  EXPECT_EQ(refusal("[^]"), "ok");

  const absl::Status beside =
      JsonSchemaGrammar(R"({"type": "string", "pattern": "a", "maxLength": 3})").status();
  EXPECT_EQ(beside.message(), "json_schema at #: 'maxLength' beside 'pattern' is not supported");
  const absl::Status named = JsonSchemaGrammar(R"j({"pattern": "(?=x)"})j").status();
  EXPECT_EQ(named.message(),
            "json_schema at #/pattern: at character 3: lookahead is not supported");
}

// Random walks over ASCII bytes (std::regex matches bytes, so the check stays exact): every
// finished string is JSON whose text the pattern matches.
TEST(JsonStringPatternTest, RandomStringsMatchTheirPattern) {
  std::mt19937 rng(5);
  for (const std::string pattern :
       {"^[A-Z]{2}\\d{2,4}(-[a-z]+)?$", "\\d", "^(\\d+\\.){3}\\d+$", "^(cat|dog)s?$", "[A-Z][^a-y]",
        "^\\w{3,5}$", "^[\\s\\S]{0,4}$", "^(a|b\"|c)+$"}) {
    SCOPED_TRACE(pattern);
    auto grammar = PatternGrammar(pattern);
    ASSERT_NE(grammar, nullptr);
    const std::regex oracle(pattern, std::regex::ECMAScript);
    int finished = 0;
    for (int walk = 0; walk < 120; ++walk) {
      absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
      ASSERT_TRUE(m.ok());
      std::string text;
      while (!m->complete() && text.size() < 80) {
        std::vector<uint8_t> next;
        for (int b = 0x20; b < 0x80; ++b) {  // no leading whitespace: start at the quote
          if (m->Allows(m->state(), static_cast<uint8_t>(b)) && (b != ' ' || !text.empty())) {
            next.push_back(static_cast<uint8_t>(b));
          }
        }
        if (next.empty()) break;  // only non-ASCII continues: drop the walk
        char byte = static_cast<char>(next[rng() % next.size()]);
        if (text.size() > 1 && m->Allows(m->state(), '"') && rng() % 6 == 0) byte = '"';
        ASSERT_TRUE(m->Accept(std::string_view(&byte, 1)).ok());
        text += byte;
      }
      if (!m->complete()) continue;
      ++finished;
      const std::string value = nlohmann::json::parse(text).get<std::string>();
      EXPECT_TRUE(std::regex_search(value, oracle)) << text;
    }
    EXPECT_GT(finished, 20);
  }
}

TEST(CodePointSetTest, EachMemberIsWrittenAsJsonWritesIt) {
  CodePointSet set = CodePointSet::Range(0, 0x20);
  set.Add(CodePointSet::Of('"')).Add(CodePointSet::Of('\\')).Add(CodePointSet::Range(0x7E, 0x900));
  set.Add(CodePointSet::Range(0xD000, 0xE100)).Add(CodePointSet::Range(0xFFF0, 0x10400));
  set.Add(CodePointSet::Of(kMaxCodePoint));
  for (const CodePointSet& s : {set, set.Complement()}) {
    GrammarBuilder builder;
    const int32_t character = builder.AddRule("c", JsonCharacterSequences(s));
    const GrammarSymbol quote = GrammarBuilder::Bytes(ByteSet::Of('"'));
    const int32_t root = builder.AddRule("s", {{quote, GrammarBuilder::Ref(character), quote}});
    auto grammar = std::make_shared<const Grammar>(*builder.Build(root));
    std::mt19937 rng(3);
    for (int i = 0; i < 6000; ++i) {
      // Low code points all, the rest sampled, the edges of each encoding length included.
      uint32_t c = i < 0x900 ? i : rng() % (kMaxCodePoint + 1);
      if (i >= 5990)
        c = std::vector<uint32_t>{0x7FF,  0x800,    0xFFFF, 0x10000, 0xD7FF,
                                  0xE000, 0x10FFFF, 0x7F,   0x80,    0xDFFF}[i - 5990];
      if (c >= 0xD800 && c <= 0xDFFF) {
        EXPECT_FALSE(s.Has(c));
        continue;
      }
      // Its UTF-8, which nlohmann then writes as JSON does (escapes for '"', '\', controls).
      std::string utf8;
      if (c < 0x80) {
        utf8 = std::string(1, static_cast<char>(c));
      } else if (c < 0x800) {
        utf8 = {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
      } else if (c < 0x10000) {
        utf8 = {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                static_cast<char>(0x80 | (c & 0x3F))};
      } else {
        utf8 = {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
                static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
      }
      EXPECT_EQ(Takes(grammar, nlohmann::json(utf8).dump()), s.Has(c)) << std::hex << c;
    }
  }
}

}  // namespace
}  // namespace tandem::engine
