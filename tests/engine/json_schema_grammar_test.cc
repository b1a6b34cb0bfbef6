// JSON Schema to grammar (engine/json_schema_grammar.h): the texts each keyword admits and
// refuses, the schemas refused by name, and random walks through the grammars, whose every
// finished text must parse as JSON and satisfy its schema.
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {
namespace {

std::shared_ptr<const Grammar> Compile(std::string_view schema) {
  absl::StatusOr<Grammar> grammar = JsonSchemaGrammar(schema);
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  return grammar.ok() ? std::make_shared<const Grammar>(*std::move(grammar)) : nullptr;
}

bool Whole(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  if (grammar == nullptr) return false;
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  return m.ok() && m->Accept(text).ok() && m->complete();
}

// The refusal of a schema, which must be INVALID_ARGUMENT and contain `says`.
void ExpectRefused(std::string_view schema, std::string_view says) {
  const absl::Status s = JsonSchemaGrammar(schema).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << schema;
  EXPECT_NE(std::string(s.message()).find(says), std::string::npos) << schema << " -> " << s;
}

TEST(JsonObjectGrammarTest, AcceptsAnyObjectAndNothingElse) {
  auto grammar = std::make_shared<const Grammar>(JsonObjectGrammar());
  for (const char* ok : {R"({})", R"( {"a": 1})", R"({"a":[1,-2.5e3,"x\u00e9\n",true,null,{}]})",
                         "{\n  \"k\": \"caf\xC3\xA9\",\n  \"n\": {\"deep\": [[], [0]]}\n}",
                         R"({"emoji":"\ud83d\ude00","bmp":"\u20AC"})"}) {
    EXPECT_TRUE(Whole(grammar, ok)) << ok;
  }
  for (const char* bad : {"[1]", "1", "\"s\"", R"({"a":})", R"({"a" 1})", "{'a':1}",
                          R"({"a":01})", R"({"a":1,})", "{\"a\":\"\x01\"}", "{\"a\":\"\xC3\x28\"}",
                          R"({"a":"\q"})", R"({"a":tru})", "{\"a\":1}  ", "{  }",
                          R"({"a":"\ud800"})", R"({"a":"\ude00\ud83d"})"}) {
    EXPECT_FALSE(Whole(grammar, bad)) << bad;
  }
}

TEST(JsonSchemaGrammarTest, PropertiesComeInOrderRequiredAlwaysOthersMaybe) {
  auto grammar = Compile(R"({"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
      "required": ["b"]})");
  for (const char* ok : {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})",
                         R"({"a":1,"b":"x","c":false})", R"({ "a" : 1 , "b" : "" })"}) {
    EXPECT_TRUE(Whole(grammar, ok)) << ok;
  }
  for (const char* bad : {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({,"b":"x"})",
                          R"({"b":"x",})", R"({"b":"x","d":1})", R"({"b":1})", R"({"a":1.5,"b":"x"})"}) {
    EXPECT_FALSE(Whole(grammar, bad)) << bad;
  }
}

TEST(JsonSchemaGrammarTest, AllOptionalPropertiesAllowTheEmptyObject) {
  auto grammar = Compile(R"({"properties": {"a": {"type": "null"}, "b": {"type": "null"}}})");
  for (const char* ok : {"{}", R"({"a":null})", R"({"b":null})", R"({"a":null,"b":null})"}) {
    EXPECT_TRUE(Whole(grammar, ok)) << ok;
  }
  EXPECT_FALSE(Whole(grammar, R"({"a":null,})"));
  EXPECT_FALSE(Whole(grammar, R"({"b":null,"a":null})"));
}

TEST(JsonSchemaGrammarTest, AdditionalProperties) {
  auto typed = Compile(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(Whole(typed, R"({"x":1,"y":2})"));
  EXPECT_TRUE(Whole(typed, "{}"));
  EXPECT_FALSE(Whole(typed, R"({"x":"s"})"));
  // Beside declared properties an extra member could repeat a declared key ({"id":1,"id":"x"}).
  ExpectRefused(R"({"properties": {"id": {"type": "integer"}}, "additionalProperties": true})",
                "other members beside declared properties are not supported");
  auto declared_closed = Compile(R"({"properties": {"id": {"type": "integer"}},
                                     "additionalProperties": false})");
  EXPECT_TRUE(Whole(declared_closed, R"({"id":1})"));
  auto closed = Compile(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(Whole(closed, "{}"));
  EXPECT_FALSE(Whole(closed, R"({"x":1})"));
  auto any = Compile(R"({"type": "object"})");
  EXPECT_TRUE(Whole(any, R"({"x":{"y":[1]}})"));
}

TEST(JsonSchemaGrammarTest, ScalarsNumbersAndStrings) {
  auto number = Compile(R"({"type": "number"})");
  for (const char* ok : {"0", "-0", "12", "-0.5", "1e9", "2.5E-3", "7e+2"}) EXPECT_TRUE(Whole(number, ok)) << ok;
  for (const char* bad : {"01", "1.", ".5", "+1", "1e", "--1", "NaN"}) EXPECT_FALSE(Whole(number, bad)) << bad;
  auto integer = Compile(R"({"type": "integer"})");
  EXPECT_TRUE(Whole(integer, "-42"));
  EXPECT_FALSE(Whole(integer, "1.0"));
  auto text = Compile(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  for (const char* ok : {R"("ab")", R"("abc")", "\"\xC3\xA9\xC3\xA9\"", R"("\n\u00e9")"}) {
    EXPECT_TRUE(Whole(text, ok)) << ok;
  }
  for (const char* bad : {R"("a")", R"("abcd")", R"(ab)"}) EXPECT_FALSE(Whole(text, bad)) << bad;
  auto maybe = Compile(R"({"type": ["boolean", "null"]})");
  EXPECT_TRUE(Whole(maybe, "true"));
  EXPECT_TRUE(Whole(maybe, "null"));
  EXPECT_FALSE(Whole(maybe, "0"));
}

TEST(JsonSchemaGrammarTest, NumericBounds) {
  auto month = Compile(R"({"type": "integer", "minimum": 1, "maximum": 12})");
  for (const char* ok : {"1", "9", "10", "12", " 7"}) EXPECT_TRUE(Whole(month, ok)) << ok;
  for (const char* no : {"0", "13", "-1", "1.0", "1e1", "012", "100"}) {
    EXPECT_FALSE(Whole(month, no)) << no;
  }
  // exclusiveMinimum as a number (draft 6 on) and as draft 4's boolean; the tighter bound holds.
  auto positive = Compile(R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1.5})");
  for (const char* ok : {"0.001", "1", "1.5", "1.50", "0.25"})
    EXPECT_TRUE(Whole(positive, ok)) << ok;
  for (const char* no : {"0", "0.0", "-0.5", "1.51", "2"}) EXPECT_FALSE(Whole(positive, no)) << no;
  auto draft4 = Compile(R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true,
                            "exclusiveMaximum": 3})");
  EXPECT_FALSE(Whole(draft4, "0"));
  EXPECT_TRUE(Whole(draft4, "1"));
  EXPECT_TRUE(Whole(draft4, "2"));
  EXPECT_FALSE(Whole(draft4, "3"));
  auto tighter = Compile(R"({"minimum": -5, "exclusiveMinimum": -2})");  // implies a number
  EXPECT_FALSE(Whole(tighter, "-2"));
  EXPECT_TRUE(Whole(tighter, "-1.99"));
  EXPECT_FALSE(Whole(tighter, "1e9"));  // bounded numbers take no exponent
  EXPECT_TRUE(Whole(tighter, "1000000000"));
  EXPECT_FALSE(Whole(tighter, "\"a\""));
  // Beside other types the bounds apply to numbers only.
  auto either = Compile(R"({"type": ["integer", "string"], "maximum": 0})");
  EXPECT_TRUE(Whole(either, "-3"));
  EXPECT_FALSE(Whole(either, "3"));
  EXPECT_TRUE(Whole(either, "\"3\""));
}

TEST(JsonSchemaGrammarTest, ArraysWithItemCounts) {
  auto grammar = Compile(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1,
                             "maxItems": 3})");
  for (const char* ok : {"[1]", "[1,2,3]", "[ 1 , 2 ]", "[\n  1,\n  2\n]"}) EXPECT_TRUE(Whole(grammar, ok)) << ok;
  for (const char* bad : {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"}) EXPECT_FALSE(Whole(grammar, bad)) << bad;
  auto empty_ok = Compile(R"({"type": "array", "maxItems": 0})");
  EXPECT_TRUE(Whole(empty_ok, "[]"));
  EXPECT_FALSE(Whole(empty_ok, "[1]"));
}

TEST(JsonSchemaGrammarTest, TupleArrays) {
  // prefixItems (2020-12): positional schemas; items false: nothing after them.
  auto pair = Compile(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                          "items": false})");
  for (const char* ok : {"[]", "[1]", R"([1, "a"])"}) EXPECT_TRUE(Whole(pair, ok)) << ok;
  for (const char* no : {R"([1, "a", 2])", R"(["a"])", R"([1, 2])"})
    EXPECT_FALSE(Whole(pair, no)) << no;
  auto whole_pair = Compile(R"({"prefixItems": [{"type": "integer"}, {"type": "string"}],
                                "minItems": 2, "items": {"type": "boolean"}, "maxItems": 3})");
  for (const char* ok : {R"([1, "a"])", R"([1,"a",true])"})
    EXPECT_TRUE(Whole(whole_pair, ok)) << ok;
  for (const char* no : {"[]", "[1]", R"([1, "a", true, false])", R"([1, "a", 3])"}) {
    EXPECT_FALSE(Whole(whole_pair, no)) << no;
  }
  // Drafts 4 to 2019-09: items as a list, additionalItems for the rest.
  auto draft7 = Compile(R"({"items": [{"const": "x"}], "additionalItems": {"type": "null"}})");
  for (const char* ok : {"[]", R"(["x"])", R"(["x", null, null])"})
    EXPECT_TRUE(Whole(draft7, ok)) << ok;
  EXPECT_FALSE(Whole(draft7, R"(["x", 1])"));
  EXPECT_FALSE(Whole(draft7, "[null]"));
  auto none = Compile(R"({"type": "array", "items": false})");
  EXPECT_TRUE(Whole(none, "[]"));
  EXPECT_FALSE(Whole(none, "[1]"));

  ExpectRefused(R"({"prefixItems": [{}], "items": false, "minItems": 2})",
                "minItems 2 is above the 1 items allowed");
  ExpectRefused(R"({"items": {"type": "null"}, "additionalItems": false})",
                "#/additionalItems: is supported only beside 'items' as a list");
  ExpectRefused(R"({"prefixItems": {"type": "null"}})", "#/prefixItems: must be a list of schemas");
  ExpectRefused(R"({"prefixItems": [{"type": "nul"}]})", "#/prefixItems/0/type: unknown type");
}

TEST(JsonSchemaGrammarTest, EnumConstAndAnyOf) {
  auto colours = Compile(R"({"enum": ["red", "green", 3, null, {"a": [1]}]})");
  for (const char* ok : {R"("red")", "3", "null", R"({"a":[1]})"}) EXPECT_TRUE(Whole(colours, ok)) << ok;
  for (const char* bad : {R"("blue")", "4", R"({"a": [1]})"}) EXPECT_FALSE(Whole(colours, bad)) << bad;
  auto fixed = Compile(R"({"const": "yes"})");
  EXPECT_TRUE(Whole(fixed, R"("yes")"));
  EXPECT_FALSE(Whole(fixed, R"("no")"));
  auto optional_int = Compile(R"({"anyOf": [{"type": "integer"}, {"type": "null"}],
                                  "title": "maybe", "default": null})");
  EXPECT_TRUE(Whole(optional_int, "5"));
  EXPECT_TRUE(Whole(optional_int, "null"));
  EXPECT_FALSE(Whole(optional_int, "\"5\""));
}

// Shapes that would multiply parses or work: a long enum (one parse per shared prefix), and
// references that fan out into the same rules at every level (2^40 paths, each expanded once).
TEST(JsonSchemaGrammarTest, LongEnumsAndSharedReferencesStayCheap) {
  std::string values;
  for (int i = 0; i < 6000; ++i) values += absl::StrCat(i ? "," : "", "\"value", i, "\"");
  auto many = Compile(R"({"enum": [)" + values + "]}");
  EXPECT_TRUE(Whole(many, "\"value5999\""));
  EXPECT_TRUE(Whole(many, "\"value12\""));
  EXPECT_FALSE(Whole(many, "\"value6000\""));
  std::string defs = R"({"$defs": {)";
  for (int i = 0; i < 40; ++i) {
    defs += absl::StrCat(i ? "," : "", "\"a", i, "\": {\"anyOf\": [{\"$ref\": \"#/$defs/a", i + 1,
                         "\"}, {\"$ref\": \"#/$defs/a", i + 1, "\"}]}");
  }
  defs += R"(, "a40": {"type": "boolean"}}, "$ref": "#/$defs/a0"})";
  // 40 references deep, under the 64 allowed.
  auto fanned = Compile(defs);
  EXPECT_TRUE(Whole(fanned, "true"));
  EXPECT_FALSE(Whole(fanned, "null"));
}

TEST(JsonSchemaGrammarTest, OneOfWithDisjointTypes) {
  auto grammar = Compile(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})");
  EXPECT_TRUE(Whole(grammar, "\"a\""));
  EXPECT_TRUE(Whole(grammar, "3"));
  EXPECT_FALSE(Whole(grammar, "true"));
}

TEST(JsonSchemaGrammarTest, RecursiveReferences) {
  auto tree = Compile(R"({"$defs": {"node": {"type": "object",
      "properties": {"value": {"type": "integer"},
                     "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(Whole(tree, R"({"value":1})"));
  EXPECT_TRUE(Whole(tree, R"({"value":1,"children":[{"value":2,"children":[{"value":3}]}]})"));
  EXPECT_FALSE(Whole(tree, R"({"value":1,"children":[{}]})"));
}

TEST(JsonSchemaGrammarTest, WhitespaceIsBounded) {
  auto grammar = Compile(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  EXPECT_TRUE(Whole(grammar, "{\n\t\"a\": 1\n}"));
  EXPECT_TRUE(Whole(grammar, "\n{\"a\":1}"));
  EXPECT_FALSE(Whole(grammar, "{\"a\":  1}"));  // two spaces
  EXPECT_FALSE(Whole(grammar, "{\n" + std::string(21, ' ') + "\"a\":1}"));
}

TEST(JsonSchemaGrammarTest, RefusesWhatItCannotEnforceByName) {
  ExpectRefused(R"({"type": "array", "uniqueItems": true})",
                "keyword 'uniqueItems' is not supported");
  ExpectRefused(R"({"properties": {"x": {"type": "integer", "multipleOf": 2}}})",
                "json_schema at #/properties/x: keyword 'multipleOf' is not supported");
  ExpectRefused(R"({"type": "integer", "minimum": "0"})", "#/minimum: must be a number");
  ExpectRefused(R"({"type": "integer", "exclusiveMaximum": true})",
                "#/exclusiveMaximum: true needs 'maximum' beside it");
  ExpectRefused(R"({"type": "integer", "minimum": 2.5, "maximum": 2.9})",
                "#: no integer is >= 2.5 and <= 2.9: no value is allowed");
  ExpectRefused(R"({"type": "number", "exclusiveMinimum": 1, "maximum": 1})",
                "no number is > 1 and <= 1");
  ExpectRefused(R"({"type": "number", "maximum": 1e-80})", "#/maximum: '1e-80' needs more than 64");
  ExpectRefused(R"({"type": "strng"})", "unknown type 'strng'");
  ExpectRefused(R"({"properties": {"a": {}}, "required": ["b"]})", "'b' is required");
  ExpectRefused(R"({"$ref": "#/$defs/none"})", "names nothing");
  ExpectRefused(R"({"$ref": "http://example.com/s.json"})", "is not a reference into this schema");
  ExpectRefused(R"({"$ref": "#"})", "derives no finite string");
  ExpectRefused(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})", "left recursion");
  ExpectRefused(R"({"type": "object", "properties": {"self": {"$ref": "#"}}, "required": ["self"]})",
                "derives no finite string");
  ExpectRefused(R"(false)", "the schema false admits no value");
  ExpectRefused(R"({"type": "string", "minLength": 3, "maxLength": 2})", "maxLength 2 is below minLength 3");
  ExpectRefused(R"({"type": "string", "maxLength": -1})", "must be an integer in [0, ");
  ExpectRefused(R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})", "allOf with more than one schema");
  ExpectRefused(R"({"type": "string", "anyOf": [{"maxLength": 2}]})", "'type' beside 'anyOf'");
  ExpectRefused(R"({"type": "integer", "enum": [1, "two"]})", "the value \"two\" is not of type integer");
  ExpectRefused(R"({"type": "string", "enum": ["a", "bb"], "maxLength": 1})",
                "'maxLength' beside 'enum' or 'const' is not supported");
  ExpectRefused(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})",
                "oneOf is supported only when each subschema has its own single type");
  ExpectRefused(R"({"oneOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]})",
                "oneOf is supported only");
  ExpectRefused(R"({"properties": {"a": {"$id": "other", "type": "null"}}})",
                "'$id' below the root is not supported");
  // Left recursion below the root (behind a byte) is found too.
  ExpectRefused(R"({"type": "object", "properties": {"a": {"anyOf": [{"$ref": "#/properties/a"},
                   {"type": "null"}]}}})",
                "left recursion");
  {
    std::string chain = R"({"$defs": {)";
    for (int i = 0; i < 100; ++i) chain += absl::StrCat(i ? "," : "", "\"d", i, "\": {\"$ref\": \"#/$defs/d", i + 1, "\"}");
    chain += R"(, "d100": {"type": "null"}}, "$ref": "#/$defs/d0"})";
    ExpectRefused(chain, "references nest deeper than 64");
  }
  {
    std::string wide = R"({"properties": {)";
    for (int i = 0; i < 1100; ++i) wide += absl::StrCat(i ? "," : "", "\"p", i, "\": {}");
    ExpectRefused(wide + "}}", "1100 properties, more than 1024");
  }
  ExpectRefused(R"({"type": )", "not valid JSON");
  ExpectRefused(std::string(100, '[') + std::string(100, ']'), "nested deeper than 64");
  ExpectRefused(R"({"type": "string", "maxLength": 1048576})", "must be an integer in [0, 10000]");
  // Each distinct pair of bounds costs its own rules: enough of them exhaust the budget.
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 40; ++i) {
    many += absl::StrCat(i ? "," : "", "\"p", i, "\": {\"type\": \"string\", \"minLength\": ", i,
                         ", \"maxLength\": 10000}");
  }
  ExpectRefused(many + "}}", "a bound such as maxLength or minItems is too large");
}

// Random walks: from the start, a uniformly chosen allowed byte at a time, stopping at a whole
// sentence with probability 1/4; a walk that runs past 600 bytes is dropped. Every finished text
// must be JSON that satisfies `check`, and no walk may get stuck (no allowed byte and not whole).
void Walk(std::string_view schema, const std::function<void(const nlohmann::json&)>& check) {
  auto grammar = Compile(schema);
  ASSERT_NE(grammar, nullptr);
  std::mt19937 rng(7);
  int finished = 0;
  for (int walk = 0; walk < 200; ++walk) {
    absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
    ASSERT_TRUE(m.ok());
    std::string text;
    while (text.size() < 600) {
      if (m->complete() && (!m->can_continue() || rng() % 4 == 0)) break;
      std::vector<uint8_t> next;
      for (int b = 0; b < 256; ++b) {
        if (m->Allows(m->state(), static_cast<uint8_t>(b))) next.push_back(static_cast<uint8_t>(b));
      }
      ASSERT_FALSE(next.empty()) << "stuck after " << text;
      const char c = static_cast<char>(next[rng() % next.size()]);
      ASSERT_TRUE(m->Accept(std::string_view(&c, 1)).ok()) << text;
      text += c;
    }
    if (!m->complete()) continue;
    ++finished;
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << "not JSON: " << text << " (" << e.what() << ")";
      continue;
    }
    SCOPED_TRACE(text);
    check(value);
  }
  EXPECT_GT(finished, 50);
}

TEST(JsonSchemaGrammarTest, RandomWalksGiveValidInstances) {
  Walk(R"({"type": "object",
           "properties": {"name": {"type": "string", "maxLength": 4},
                          "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
                          "ok": {"type": "boolean"}},
           "required": ["name", "ok"]})",
       [](const nlohmann::json& v) {
         ASSERT_TRUE(v.is_object());
         ASSERT_TRUE(v.contains("name") && v["name"].is_string());
         EXPECT_LE(v["name"].get<std::string>().size(), 4u * 4);  // ≤ 4 characters
         ASSERT_TRUE(v.contains("ok") && v["ok"].is_boolean());
         if (v.contains("tags")) {
           ASSERT_TRUE(v["tags"].is_array());
           EXPECT_LE(v["tags"].size(), 2u);
           for (const auto& t : v["tags"]) EXPECT_TRUE(t == "x" || t == "y");
         }
         for (const auto& [key, unused] : v.items()) {
           EXPECT_TRUE(key == "name" || key == "tags" || key == "ok") << key;
         }
       });
  Walk(R"({"type": "object", "properties": {
             "t": {"type": "number", "minimum": -2.5, "exclusiveMaximum": 10},
             "n": {"type": "integer", "exclusiveMinimum": -3, "maximum": 40}},
           "required": ["t", "n"]})",
       [](const nlohmann::json& v) {
         ASSERT_TRUE(v.is_object());
         ASSERT_TRUE(v["t"].is_number());
         EXPECT_GE(v["t"].get<double>(), -2.5);
         EXPECT_LT(v["t"].get<double>(), 10);
         ASSERT_TRUE(v["n"].is_number_integer());
         EXPECT_GT(v["n"].get<int64_t>(), -3);
         EXPECT_LE(v["n"].get<int64_t>(), 40);
       });
  Walk(R"({"type": "array", "prefixItems": [{"type": "boolean"}, {"enum": ["a", "b"]}],
           "items": {"type": "null"}, "maxItems": 4})",
       [](const nlohmann::json& v) {
         ASSERT_TRUE(v.is_array());
         EXPECT_LE(v.size(), 4u);
         if (v.size() > 0) {
           EXPECT_TRUE(v[0].is_boolean());
         }
         if (v.size() > 1) {
           EXPECT_TRUE(v[1] == "a" || v[1] == "b");
         }
         for (size_t i = 2; i < v.size(); ++i) EXPECT_TRUE(v[i].is_null());
       });
  Walk(R"({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "null"}, "maxItems": 3}]})",
       [](const nlohmann::json& v) {
         EXPECT_TRUE(v.is_number_integer() || (v.is_array() && v.size() <= 3)) << v.dump();
       });
}

}  // namespace
}  // namespace tandem::engine

namespace tandem::engine {
namespace {

// Framed values: JSON inside a model's markup, as tool calls are written.
TEST(FramedJsonSchemaGrammarTest, ValuesComeBetweenTheirLiteralsAsManyTimesAsAllowed) {
  const char* schema = R"({"type": "object", "properties": {"n": {"type": "integer"}},
                          "required": ["n"]})";
  JsonFrame frame;
  frame.open = "<call>\n";
  frame.close = "\n</call>";
  frame.separator = "\n";
  frame.min_count = 1;
  frame.max_count = 2;
  absl::StatusOr<Grammar> built = FramedJsonSchemaGrammar(schema, frame);
  ASSERT_TRUE(built.ok()) << built.status();
  auto grammar = std::make_shared<const Grammar>(*std::move(built));
  for (const char* ok : {"<call>\n{\"n\":1}\n</call>", "<call>\n {\"n\": 2}\n</call>",
                         "<call>\n{\"n\":1}\n</call>\n<call>\n{\"n\":3}\n</call>"}) {
    EXPECT_TRUE(Whole(grammar, ok)) << ok;
  }
  for (const char* bad : {"", "{\"n\":1}", "<call>\n{\"n\":1}</call>", "<call>\n{}\n</call>",
                          "<call>\n{\"n\":1}\n</call>\n<call>\n{\"n\":1}\n</call>\n<call>\n{\"n\":1}"
                          "\n</call>"}) {
    EXPECT_FALSE(Whole(grammar, bad)) << bad;
  }

  // One array between markers, as Jamba writes its calls.
  JsonFrame wrapped;
  wrapped.before = "<tool_calls>";
  wrapped.after = "</tool_calls>";
  built = FramedJsonSchemaGrammar(R"({"type": "array", "items": {"type": "integer"}})", wrapped);
  ASSERT_TRUE(built.ok()) << built.status();
  grammar = std::make_shared<const Grammar>(*std::move(built));
  EXPECT_TRUE(Whole(grammar, "<tool_calls>[1, 2]</tool_calls>"));
  EXPECT_FALSE(Whole(grammar, "<tool_calls>[1, 2]"));
  EXPECT_FALSE(Whole(grammar, "[1]</tool_calls>"));

  frame.max_count = 0;
  EXPECT_EQ(FramedJsonSchemaGrammar(schema, frame).status().code(),
            absl::StatusCode::kInvalidArgument);
  frame.max_count = 1;
  EXPECT_NE(FramedJsonSchemaGrammar(R"({"uniqueItems": true})", frame)
                .status()
                .message()
                .find("uniqueItems"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::engine
