// Unit tests of the chat template engine: constructs, whitespace control, errors, limits.
#include "server/chat_template/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::chat_template {
namespace {

using ::testing::HasSubstr;

std::string RenderOrDie(const std::string& src, const nlohmann::ordered_json& ctx = {}) {
  auto t = ChatTemplate::Parse(src);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return "<parse error>";
  auto r = t->Render(ctx.is_null() ? nlohmann::ordered_json::object() : ctx);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "<render error: " + std::string(r.status().message()) + ">";
}

absl::Status RenderError(const std::string& src, const nlohmann::ordered_json& ctx = {}) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return t.status();
  auto r = t->Render(ctx.is_null() ? nlohmann::ordered_json::object() : ctx);
  return r.status();
}

TEST(ChatTemplate, PlainTextAndExpressions) {
  EXPECT_EQ(RenderOrDie("hello"), "hello");
  EXPECT_EQ(RenderOrDie("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}"),
            "7|3|-4|-2|1024");
  EXPECT_EQ(RenderOrDie("{{ 1 / 2 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1e-5 }}|{{ 3.0 }}"),
            "0.5|0.30000000000000004|1e+20|1e-05|3.0");
  EXPECT_EQ(RenderOrDie("{{ [1, 'a', none, true] }}|{{ {'k': \"it's\"} }}"),
            "[1, 'a', None, True]|{'k': \"it's\"}");
}

TEST(ChatTemplate, WhitespaceControl) {
  EXPECT_EQ(RenderOrDie("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(RenderOrDie("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(RenderOrDie("x\n"), "x");
}

TEST(ChatTemplate, ParseErrorsNameLineAndColumn) {
  auto t = ChatTemplate::Parse("line one\n{% for x in y %}\n{{ x }}");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("line 3"));
  EXPECT_THAT(t.status().message(), HasSubstr("endfor"));
  t = ChatTemplate::Parse("{{ a + }}");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("line 1, column 8"));
  EXPECT_THAT(t.status().message(), HasSubstr("expected an expression"));
}

TEST(ChatTemplate, RenderErrors) {
  EXPECT_THAT(RenderError("{{ raise_exception('bad role') }}").message(), HasSubstr("bad role"));
  EXPECT_THAT(RenderError("{{ 1 | nosuch }}").message(), HasSubstr("no filter named 'nosuch'"));
  EXPECT_THAT(RenderError("\n{{ 'a' + 1 }}").message(), HasSubstr("line 2"));
  EXPECT_THAT(RenderError("{{ foo.bar }}").message(), HasSubstr("'foo' is undefined"));
  EXPECT_THAT(RenderError("{{ foo + 1 }}").message(), HasSubstr("undefined"));
}

TEST(ChatTemplate, TransformersGlobals) {
  std::string year = RenderOrDie("{{ strftime_now('%Y') }}");
  EXPECT_EQ(year.size(), 4u);
  EXPECT_EQ(year.substr(0, 2), "20");
  EXPECT_THAT(RenderError("{{ strftime_now() }}").message(), HasSubstr("strftime_now"));
  // Context keys shadow the built-in globals, as render(**context) does in jinja2.
  EXPECT_EQ(RenderOrDie("{{ range }}", {{"range", "mine"}}), "mine");
  EXPECT_EQ(RenderOrDie("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(ChatTemplate, UnorderedJsonContextSortsKeysButRenders) {
  auto t = ChatTemplate::Parse("{{ tools | tojson }}|{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  nlohmann::json ctx = {{"tools", {{{"b", 1}, {"a", 2}}}},
                        {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto r = t->Render(ctx);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "[{\"a\": 2, \"b\": 1}]|hi");
  EXPECT_FALSE(t->Render(nlohmann::json::array()).ok());
}

TEST(ChatTemplate, CopiesShareTheParsedTemplate) {
  auto t = ChatTemplate::Parse("{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m(name) }}");
  ASSERT_TRUE(t.ok());
  ChatTemplate copy = *t;
  t = ChatTemplate::Parse("other");
  auto r = copy.Render(nlohmann::json{{"name", "n"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "<n>");
}

TEST(ChatTemplate, Limits) {
  RenderLimits limits;
  limits.max_loop_iterations = 1000;
  auto t = ChatTemplate::Parse(
      "{% for i in range(10) %}{% for j in range(200) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(nlohmann::ordered_json::object(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("loop iterations"));

  t = ChatTemplate::Parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(t.ok());
  r = t->Render(nlohmann::ordered_json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nested deeper"));

  limits = RenderLimits();
  limits.max_output_bytes = 100;
  t = ChatTemplate::Parse("{% for i in range(60) %}xx{% endfor %}");
  r = t->Render(nlohmann::ordered_json::object(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("output exceeds 100 bytes"));

  t = ChatTemplate::Parse(
      "{% set ns = namespace(s='x') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ ns.s[:10] "
      "%}{% endfor %}");
  r = t->Render(nlohmann::ordered_json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("work limit"));

  std::string deep(5000, '(');
  EXPECT_FALSE(ChatTemplate::Parse("{{ " + deep + " }}").ok());
}

}  // namespace
}  // namespace tandem::chat_template
