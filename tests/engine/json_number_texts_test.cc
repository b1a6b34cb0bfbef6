// JSON with its numbers' texts (engine/json_number_texts.h): doubles keep the text the document
// wrote, by JSON pointer, so that a schema's bounds and constants mean exactly that; and the
// schema compiler uses them (an integer bound beyond 2^64, a constant of 30 digits).
#include "engine/json_number_texts.h"

#include <memory>
#include <string>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

TEST(JsonNumberTextsTest, DoublesKeepTheirTextByPointer) {
  absl::StatusOr<JsonWithNumberTexts> parsed = ParseJsonWithNumberTexts(
      R"({"a": [1, 2.50, {"x/y": 1e-400, "t~": 99999999999999999999}], "b": 7, "c": -0.0})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->value["b"], 7);
  EXPECT_EQ(parsed->value["a"][1], 2.5);
  const std::map<std::string, std::string> expected = {{"/a/1", "2.50"},
                                                       {"/a/2/x~1y", "1e-400"},
                                                       {"/a/2/t~0", "99999999999999999999"},
                                                       {"/c", "-0.0"}};
  EXPECT_EQ(parsed->number_texts, expected);
  // Members keep their order, as ordered_json's parse keeps it.
  EXPECT_EQ(parsed->value.begin().key(), "a");
  EXPECT_EQ(DumpWithNumberTexts(parsed->value["a"], "/a", parsed->number_texts),
            R"([1,2.50,{"x/y":1e-400,"t~":99999999999999999999}])");
  EXPECT_FALSE(ParseJsonWithNumberTexts(R"({"a": 1e400})").ok());  // overflow
  EXPECT_FALSE(ParseJsonWithNumberTexts(R"({"a": )").ok());
  EXPECT_EQ(PointerSegment("a/b~c"), "a~1b~0c");
}

bool Whole(std::string_view schema, std::string_view text) {
  absl::StatusOr<Grammar> grammar = JsonSchemaGrammar(schema);
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  if (!grammar.ok()) return false;
  absl::StatusOr<GrammarMatcher> m =
      GrammarMatcher::Create(std::make_shared<const Grammar>(*std::move(grammar)));
  return m.ok() && m->Accept(text).ok() && m->complete();
}

TEST(JsonNumberTextsTest, SchemasMeanTheNumbersTheyWrite) {
  const char* beyond_64_bits = R"({"type": "integer", "maximum": 99999999999999999999})";
  EXPECT_TRUE(Whole(beyond_64_bits, "99999999999999999999"));
  EXPECT_FALSE(Whole(beyond_64_bits, "100000000000000000000"));
  const char* tiny = R"({"type": "number", "exclusiveMinimum": 1e-30, "maximum": 1})";
  EXPECT_FALSE(Whole(tiny, "0"));
  EXPECT_FALSE(Whole(tiny, "0.000000000000000000000000000001"));  // exactly 1e-30
  EXPECT_TRUE(Whole(tiny, "0.0000000000000000000000000000011"));
  const char* constant = R"({"const": 123456789012345678901234567890})";
  EXPECT_TRUE(Whole(constant, "123456789012345678901234567890"));
  EXPECT_FALSE(Whole(constant, "1.2345678901234568e+29"));
  EXPECT_TRUE(Whole(R"({"enum": [0.1, [2.50]]})", "[2.50]"));
  const absl::Status underflow =
      JsonSchemaGrammar(R"({"type": "number", "minimum": 1e-400})").status();
  EXPECT_EQ(underflow.message(), "json_schema at #/minimum: '1e-400' needs more than 64 digits");
}

}  // namespace
}  // namespace tandem::engine
