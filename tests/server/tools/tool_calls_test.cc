// Tool calls in a model's output (server/tools/tool_calls.h, tool_call_format.h,
// forced_tool_calls.h): each format's calls are found, with content around them kept and broken
// blocks left as text; a stream cut at every byte hands out what the whole parse gives; the
// grammar of a forced choice admits exactly the calls of the request's tools.
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar_matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tools/forced_tool_calls.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_calls.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

const json& WeatherTools() {
  static const json* const kTools = new json(json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])"));
  return *kTools;
}

// The calls and content of `text`, each call as "name(arguments)".
std::vector<std::string> Calls(const ToolCallPiece& piece) {
  std::vector<std::string> out;
  for (const ToolCall& call : piece.calls) out.push_back(call.name + call.arguments);
  return out;
}

TEST(ToolCallFormatTest, TheChatTemplateShowsTheFormat) {
  EXPECT_EQ(DetectToolCallFormat("... <tool_call>\n{\"name\": ...}\n</tool_call> ..."),
            ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("{{ '<tool_calls>' }}{{ calls | tojson }}</tool_calls>"),
            ToolCallFormat::kJamba);
  EXPECT_EQ(DetectToolCallFormat("<TOOLCALL>[...]</TOOLCALL>"), ToolCallFormat::kNemotronJson);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n<function={{ name }}>\n<parameter="),
            ToolCallFormat::kXmlFunction);
  EXPECT_EQ(DetectToolCallFormat("{% for m in messages %}{{ m.content }}{% endfor %}"),
            ToolCallFormat::kNone);
  for (ToolCallFormat format :
       {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kJamba,
        ToolCallFormat::kNemotronJson, ToolCallFormat::kXmlFunction}) {
    absl::StatusOr<ToolCallFormat> parsed = ParseToolCallFormat(ToolCallFormatName(format));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, format);
  }
  EXPECT_NE(ParseToolCallFormat("qwen").status().message().find("one of none, hermes"),
            std::string::npos);
}

TEST(ToolCallsTest, EachFormatsCallsAreFound) {
  ToolCallPiece hermes = ParseToolCalls(
      ToolCallFormat::kHermes, WeatherTools(),
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\"}\n</tool_call>\n");
  EXPECT_EQ(hermes.content, "Let me look.\n");
  EXPECT_EQ(Calls(hermes), (std::vector<std::string>{
                               R"(get_weather{"city":"Oslo","days":2})", "now{}"}));

  ToolCallPiece jamba = ParseToolCalls(
      ToolCallFormat::kJamba, WeatherTools(),
      R"(<tool_calls>[{"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}, )"
      R"({"name": "now", "arguments": {}}]</tool_calls>)");
  EXPECT_EQ(jamba.content, "");
  EXPECT_EQ(Calls(jamba),
            (std::vector<std::string>{R"(get_weather{"city":"Rome"})", "now{}"}));

  ToolCallPiece nemotron = ParseToolCalls(
      ToolCallFormat::kNemotronJson, WeatherTools(),
      R"(<TOOLCALL>[{"name": "get_weather", "arguments": {"days": 1, "city": "Lima"}}]</TOOLCALL>)");
  // The model's order of arguments is kept.
  EXPECT_EQ(Calls(nemotron), (std::vector<std::string>{R"(get_weather{"days":1,"city":"Lima"})"}));

  // XML: values are typed by the tool's schema; a string stays a string even when it looks
  // like a number.
  ToolCallPiece xml = ParseToolCalls(
      ToolCallFormat::kXmlFunction, WeatherTools(),
      "<tool_call>\n<function=get_weather>\n<parameter=city>\n1984\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(Calls(xml), (std::vector<std::string>{R"(get_weather{"city":"1984","days":3})"}));

  // Without a format nothing is parsed.
  ToolCallPiece none = ParseToolCalls(ToolCallFormat::kNone, WeatherTools(),
                                      "<tool_call>{\"name\": \"now\"}</tool_call>");
  EXPECT_TRUE(none.calls.empty());
  EXPECT_EQ(none.content, "<tool_call>{\"name\": \"now\"}</tool_call>");
}

TEST(ToolCallsTest, WhatDoesNotParseStaysContent) {
  for (const char* broken :
       {"<tool_call>\n{\"name\": \"now\"\n</tool_call>",           // broken JSON
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",          // no name
        "<tool_call>\n{\"name\": \"now\", \"arguments\": 5}\n</tool_call>",  // not an object
        "<tool_call>\n[1, 2]\n</tool_call>"}) {
    ToolCallPiece piece = ParseToolCalls(ToolCallFormat::kHermes, WeatherTools(), broken);
    EXPECT_TRUE(piece.calls.empty()) << broken;
    EXPECT_EQ(piece.content, broken);
  }
  ToolCallPiece xml = ParseToolCalls(ToolCallFormat::kXmlFunction, WeatherTools(),
                                     "<tool_call>\n<function=now>\n<parameter=x>\n1\n</tool_call>");
  EXPECT_TRUE(xml.calls.empty());
  // A block cut off by the end of the output counts when what it holds parses.
  ToolCallPiece cut = ParseToolCalls(ToolCallFormat::kHermes, WeatherTools(),
                                     "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n");
  EXPECT_EQ(Calls(cut), std::vector<std::string>{"now{}"});
  // A marker's lookalike is text.
  ToolCallPiece text = ParseToolCalls(ToolCallFormat::kHermes, WeatherTools(), "a <tool_cal b");
  EXPECT_EQ(text.content, "a <tool_cal b");
}

TEST(ToolCallsTest, AStreamCutAnywhereHandsOutTheWholeParse) {
  const std::string text =
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}\n"
      "</tool_call>\n\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n"
      "Done <tool";
  const ToolCallPiece whole = ParseToolCalls(ToolCallFormat::kHermes, WeatherTools(), text);
  EXPECT_EQ(whole.content, "Sure.\n\nDone <tool");
  ASSERT_EQ(whole.calls.size(), 2u);
  for (size_t step = 1; step <= 9; ++step) {
    ToolCallStream stream(ToolCallFormat::kHermes, WeatherTools());
    std::string content;
    std::vector<std::string> calls;
    for (size_t at = 0; at < text.size(); at += step) {
      for (const ToolCallPiece& piece : stream.Feed(std::string_view(text).substr(at, step))) {
        content += piece.content;
        for (const std::string& call : Calls(piece)) calls.push_back(call);
        // Nothing of a marker or a block goes out as content before its end.
        EXPECT_EQ(piece.content.find('{'), std::string::npos) << piece.content;
      }
    }
    ToolCallPiece rest = stream.Finish();
    content += rest.content;
    for (const std::string& call : Calls(rest)) calls.push_back(call);
    EXPECT_EQ(content, whole.content) << step;
    EXPECT_EQ(calls, Calls(whole)) << step;
  }
  // Whitespace after the last call is dropped, however the text comes.
  const std::string after = "<tool_call>\n{\"name\": \"now\"}\n</tool_call>\nDone.\n \n";
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kHermes, WeatherTools(), after).content, "\nDone.");
  for (size_t step = 1; step <= 9; ++step) {
    ToolCallStream stream(ToolCallFormat::kHermes, WeatherTools());
    std::string content;
    for (size_t at = 0; at < after.size(); at += step) {
      for (const ToolCallPiece& piece : stream.Feed(std::string_view(after).substr(at, step))) {
        content += piece.content;
      }
    }
    content += stream.Finish().content;
    EXPECT_EQ(content, "\nDone.") << step;
  }
}

TEST(ToolCallsTest, PiecesKeepTheOrderOfContentAndCalls) {
  ToolCallStream stream(ToolCallFormat::kHermes, WeatherTools());
  std::vector<ToolCallPiece> pieces = stream.Feed(
      "A <tool_call>{\"name\": \"now\"}</tool_call> B <tool_call>{\"name\": \"now\"}</tool_call>"
      " C <tool_c");
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].content, "A ");
  EXPECT_EQ(pieces[0].calls.size(), 1u);
  EXPECT_EQ(pieces[1].content, " B");  // the space before the next block separates the calls
  EXPECT_EQ(pieces[1].calls.size(), 1u);
  EXPECT_EQ(pieces[2].content, " C");
  EXPECT_TRUE(pieces[2].calls.empty());
  EXPECT_EQ(stream.Finish().content, " <tool_c");
}

TEST(ToolCallsTest, OddToolListsAndDeepOutputAreNoCalls) {
  // Tools a client may send in any shape: the parse reads around them, never throws.
  const json odd = json::parse(R"([5, null, {"type": 1}, {"function": 7},
      {"type": "function", "function": {"name": null}},
      {"type": "function", "function": {"name": "f", "parameters": {"properties": [1]}}},
      {"type": "function", "function": {"name": "f", "parameters": "x"}}])");
  ToolCallPiece xml = ParseToolCalls(
      ToolCallFormat::kXmlFunction, odd,
      "<tool_call>\n<function=f>\n<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(Calls(xml), std::vector<std::string>{R"(f{"n":7})"});
  EXPECT_TRUE(ParseToolCalls(ToolCallFormat::kXmlFunction, json(42),
                             "<tool_call>\n<function= >\n</function>\n</tool_call>")
                  .calls.empty());
  // Nesting past 64 levels is not a call (and is not walked recursively).
  const std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " +
                           std::string(200, '[') + std::string(200, ']') + "}}</tool_call>";
  ToolCallPiece piece = ParseToolCalls(ToolCallFormat::kHermes, odd, deep);
  EXPECT_TRUE(piece.calls.empty());
  EXPECT_EQ(piece.content, deep);
}

bool Whole(const engine::Grammar& grammar, std::string_view text) {
  auto shared = std::make_shared<const engine::Grammar>(grammar);
  absl::StatusOr<engine::GrammarMatcher> m = engine::GrammarMatcher::Create(shared);
  return m.ok() && m->Accept(text).ok() && m->complete();
}

TEST(ForcedToolCallsTest, TheGrammarAdmitsCallsOfTheRequestsTools) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(WeatherTools().dump());
  absl::StatusOr<engine::Grammar> any =
      ForcedToolCallGrammar(ToolCallFormat::kHermes, tools, "", /*parallel=*/true);
  ASSERT_TRUE(any.ok()) << any.status();
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(Whole(*any, weather));
  EXPECT_TRUE(Whole(*any, weather + "\n" + now));
  EXPECT_FALSE(Whole(*any, "Hello"));
  EXPECT_FALSE(Whole(*any, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(Whole(*any, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                           "{\"days\": 2}}\n</tool_call>"));  // city is required
  // Every call the grammar admits parses back to itself.
  EXPECT_EQ(Calls(ParseToolCalls(ToolCallFormat::kHermes, WeatherTools(), weather + "\n" + now)),
            (std::vector<std::string>{R"(get_weather{"city":"Oslo"})", "now{}"}));

  absl::StatusOr<engine::Grammar> one =
      ForcedToolCallGrammar(ToolCallFormat::kHermes, tools, "now", /*parallel=*/false);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(Whole(*one, now));
  EXPECT_FALSE(Whole(*one, weather));
  EXPECT_FALSE(Whole(*one, now + "\n" + now));

  absl::StatusOr<engine::Grammar> jamba =
      ForcedToolCallGrammar(ToolCallFormat::kJamba, tools, "", /*parallel=*/true);
  ASSERT_TRUE(jamba.ok()) << jamba.status();
  EXPECT_TRUE(Whole(*jamba, R"(<tool_calls>[{"name": "now", "arguments": {}}, )"
                            R"({"name": "get_weather", "arguments": {"city": "x"}}]</tool_calls>)"));
  EXPECT_FALSE(Whole(*jamba, "<tool_calls>[]</tool_calls>"));

  // A schema referring into itself still resolves once embedded.
  const nlohmann::ordered_json refs = nlohmann::ordered_json::parse(R"([{"type": "function",
      "function": {"name": "move", "parameters": {"type": "object",
        "properties": {"to": {"$ref": "#/$defs/point"}}, "required": ["to"],
        "$defs": {"point": {"type": "array", "items": {"type": "integer"}}}}}}])");
  absl::StatusOr<engine::Grammar> moved =
      ForcedToolCallGrammar(ToolCallFormat::kNemotronJson, refs, "", /*parallel=*/false);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_TRUE(Whole(*moved, R"(<TOOLCALL>[{"name": "move", "arguments": {"to": [1, 2]}}]</TOOLCALL>)"));
  EXPECT_FALSE(Whole(*moved, R"(<TOOLCALL>[{"name": "move", "arguments": {"to": "x"}}]</TOOLCALL>)"));
}

TEST(ForcedToolCallsTest, WhatCannotBeEnforcedIsRefusedByName) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(WeatherTools().dump());
  auto refusal = [](ToolCallFormat format, const nlohmann::ordered_json& tools,
                    const std::string& only) {
    return std::string(ForcedToolCallGrammar(format, tools, only, true).status().message());
  };
  EXPECT_NE(refusal(ToolCallFormat::kXmlFunction, tools, "").find("tool_choice: "),
            std::string::npos);
  EXPECT_NE(refusal(ToolCallFormat::kHermes, tools, "fly").find(
                "tool_choice.function.name: 'fly' is not one of the request's tools"),
            std::string::npos);
  const nlohmann::ordered_json pattern = nlohmann::ordered_json::parse(R"([{"type": "function",
      "function": {"name": "f"}}, {"type": "function", "function": {"name": "g", "parameters":
      {"type": "object", "properties": {"id": {"type": "array", "uniqueItems": true}}}}}])");
  const std::string message = refusal(ToolCallFormat::kHermes, pattern, "");
  EXPECT_NE(message.find("tools[1].function.parameters: json_schema at #/properties/id"),
            std::string::npos)
      << message;
  for (const char* odd : {R"([{"type": "x"}])", R"([{"type": 1}])", R"([{"type": null}])",
                          R"([5])", R"([{"type": "function", "function": 3}])"}) {
    EXPECT_NE(refusal(ToolCallFormat::kHermes, nlohmann::ordered_json::parse(odd), "")
                  .find("tools[0]: must be"),
              std::string::npos)
        << odd;
  }
  EXPECT_NE(refusal(ToolCallFormat::kHermes, nlohmann::ordered_json::parse(R"([{"type":
                "function", "function": {"name": 5}}])"), "")
                .find("tools[0].function.name: required, a string"),
            std::string::npos);
  for (const char* parameters : {R"("x")", R"(5)", R"({"type": "string"})"}) {
    const auto tool = nlohmann::ordered_json::parse(
        std::string(R"([{"type": "function", "function": {"name": "f", "parameters": )") +
        parameters + "}}]");
    EXPECT_NE(refusal(ToolCallFormat::kHermes, tool, "").find("tools[0].function.parameters: must"),
              std::string::npos)
        << parameters;
  }
}

TEST(ForcedToolCallsTest, SchemasOfEveryShapeEmbed) {
  // A property named like a data keyword is still a schema whose reference moves; a root that
  // is a reference or a union gets no "type" beside it.
  const auto tools = nlohmann::ordered_json::parse(R"([
      {"type": "function", "function": {"name": "a", "parameters": {"type": "object",
        "properties": {"default": {"$ref": "#/$defs/V"}}, "required": ["default"],
        "$defs": {"V": {"type": "string", "maxLength": 3}}}}},
      {"type": "function", "function": {"name": "b", "parameters": {"$ref": "#/$defs/Args",
        "$defs": {"Args": {"type": "object", "properties": {"x": {"type": "integer"}},
                           "required": ["x"]}}}}},
      {"type": "function", "function": {"name": "c", "parameters": {"anyOf": [
        {"type": "object", "properties": {"p": {"type": "boolean"}}, "required": ["p"]},
        {"type": "object", "properties": {"q": {"type": "null"}}, "required": ["q"]}]}}}])");
  absl::StatusOr<engine::Grammar> grammar =
      ForcedToolCallGrammar(ToolCallFormat::kHermes, tools, "", /*parallel=*/false);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  auto call = [](const std::string& json) { return "<tool_call>\n" + json + "\n</tool_call>"; };
  EXPECT_TRUE(Whole(*grammar, call(R"({"name": "a", "arguments": {"default": "abc"}})")));
  EXPECT_FALSE(Whole(*grammar, call(R"({"name": "a", "arguments": {"default": "abcd"}})")));
  EXPECT_TRUE(Whole(*grammar, call(R"({"name": "b", "arguments": {"x": 4}})")));
  EXPECT_FALSE(Whole(*grammar, call(R"({"name": "b", "arguments": {"x": "4"}})")));
  EXPECT_TRUE(Whole(*grammar, call(R"({"name": "c", "arguments": {"q": null}})")));
  EXPECT_FALSE(Whole(*grammar, call(R"({"name": "c", "arguments": {}})")));
}

TEST(ForcedToolCallsTest, ArgumentsAreAlwaysAnObjectAndEmbeddedSchemasKeepTheirMeaning) {
  // "parameters": {} (and true) mean any object, never a bare value the parser would refuse.
  const auto loose = nlohmann::ordered_json::parse(R"([{"type": "function", "function":
      {"name": "f", "parameters": {}}}, {"type": "function", "function": {"name": "g",
      "parameters": true}}])");
  absl::StatusOr<engine::Grammar> grammar =
      ForcedToolCallGrammar(ToolCallFormat::kHermes, loose, "", /*parallel=*/false);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(Whole(*grammar, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": [1]}}\n</tool_call>"));
  EXPECT_TRUE(Whole(*grammar, "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(Whole(*grammar, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"x\"}\n</tool_call>"));

  // References resolve where the schema lands (the second tool, the first being filtered out by
  // the named choice, and hermes' own layout); a const holding "$ref" is data and stays; the
  // parameters' own $id and $schema do not get in the way.
  const auto refs = nlohmann::ordered_json::parse(R"([
      {"type": "function", "function": {"name": "skip"}},
      {"type": "function", "function": {"name": "move", "parameters": {"$id": "urn:move",
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "properties": {"to": {"$ref": "#/$defs/point"}, "tag": {"const": {"$ref": "#/x"}}},
        "required": ["to", "tag"],
        "$defs": {"point": {"type": "array", "items": {"type": "integer"}}}}}}])");
  grammar = ForcedToolCallGrammar(ToolCallFormat::kHermes, refs, "move", /*parallel=*/false);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(Whole(*grammar, "<tool_call>\n{\"name\": \"move\", \"arguments\": {\"to\": [3], "
                              "\"tag\": {\"$ref\":\"#/x\"}}}\n</tool_call>"));  // consts are compact
  EXPECT_FALSE(Whole(*grammar, "<tool_call>\n{\"name\": \"move\", \"arguments\": {\"to\": \"a\", "
                               "\"tag\": {\"$ref\":\"#/x\"}}}\n</tool_call>"));
}

}  // namespace
}  // namespace tandem::server
