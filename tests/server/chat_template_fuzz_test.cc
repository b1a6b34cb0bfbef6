// Mutation fuzzing of the template engine: truncations, deletions, duplications, splices of
// template syntax and random bytes applied to the fixture corpus must always give an error
// or a rendering, never a crash or a hang. Deterministic (fixed seed) so failures
// reproduce; run it under -DTANDEM_SANITIZE=ON to catch memory errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "server/chat_template/chat_template.h"

namespace tandem::chat_template {
namespace {

namespace fs = std::filesystem;
const fs::path kRoot = fs::path(TANDEM_TEST_DATA) / "chat_templates";

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> ReadAll(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(ReadFile(p));
  return out;
}

const char* const kSnippets[] = {"{{",
                                 "}}",
                                 "{%",
                                 "%}",
                                 "{#",
                                 "#}",
                                 "{%-",
                                 "-%}",
                                 "{{-",
                                 "-}}",
                                 "{%+",
                                 "+%}",
                                 "(",
                                 ")",
                                 "[",
                                 "]",
                                 "{",
                                 "}",
                                 "'",
                                 "\"",
                                 "\\",
                                 "|",
                                 ",",
                                 ":",
                                 ".",
                                 "=",
                                 "==",
                                 "~",
                                 "*",
                                 "**",
                                 "//",
                                 "-",
                                 "+",
                                 " if ",
                                 " else ",
                                 " endif ",
                                 " for ",
                                 " in ",
                                 " endfor ",
                                 " set ",
                                 " macro ",
                                 " endmacro ",
                                 " call ",
                                 " endcall ",
                                 " is ",
                                 " not ",
                                 " and ",
                                 " or ",
                                 " none ",
                                 "loop",
                                 "loop.index",
                                 "messages",
                                 "range(99999999)",
                                 "range(3)",
                                 "x",
                                 " recurse(9) ",
                                 "'a' * 999999",
                                 "| tojson(indent=2)",
                                 "| join",
                                 "| map('upper')",
                                 "| default",
                                 "| indent(1000)",
                                 "raise_exception('boom')",
                                 "namespace(a=1)",
                                 "caller()",
                                 "[::-1]",
                                 "[1:]",
                                 "\xff",
                                 "\xc3",
                                 "\n",
                                 "\t",
                                 " ",
                                 "0",
                                 "1e308",
                                 "-9223372036854775808",
                                 "9223372036854775807",
                                 "** 99",
                                 "{% set ns.a = [ns, ns] %}{{ ns }}",
                                 "{% set l = [l, l] %}",
                                 "{% break %}",
                                 "{% continue %}",
                                 "{% generation %}",
                                 "{% endgeneration %}",
                                 "{% filter upper %}",
                                 "{% endfilter %}",
                                 "{% raw %}",
                                 "{%- endraw -%}"};

std::string Mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  int steps = rng() % 3 == 0 ? 2 : 1;
  for (int i = 0; i < steps; ++i) {
    size_t pos = pick(s.size() + 1);
    switch (rng() % 6) {
      case 0:  // truncate
        s.resize(pos);
        break;
      case 1: {  // delete a range
        size_t len = pick(32) + 1;
        if (pos < s.size()) s.erase(pos, len);
        break;
      }
      case 2:  // splice syntax
        s.insert(pos, kSnippets[pick(std::size(kSnippets))]);
        break;
      case 3: {  // duplicate a range (nesting grows)
        size_t len = pick(200) + 1;
        if (pos < s.size()) s.insert(pos, s.substr(pos, len));
        break;
      }
      case 4:  // random byte
        if (pos < s.size()) s[pos] = static_cast<char>(rng());
        break;
      default: {  // swap two ranges' order by moving a chunk
        size_t len = pick(64) + 1;
        if (pos < s.size()) {
          std::string chunk = s.substr(pos, len);
          s.erase(pos, len);
          s.insert(pick(s.size() + 1), chunk);
        }
      }
    }
  }
  return s;
}

TEST(ChatTemplateFuzz, MutatedCorpusNeverCrashesOrHangs) {
  const auto templates = ReadAll(kRoot / "templates", ".jinja");
  std::vector<nlohmann::ordered_json> contexts;
  for (const auto& c : ReadAll(kRoot / "contexts", ".json")) {
    contexts.push_back(nlohmann::ordered_json::parse(c));
  }
  ASSERT_FALSE(templates.empty());
  ASSERT_FALSE(contexts.empty());
  RenderLimits limits;  // tight, so the run stays fast under sanitizers
  limits.max_output_bytes = 1 << 16;
  limits.max_loop_iterations = 20000;
  limits.max_work = 1 << 22;
  std::mt19937_64 rng(20261122);
  const int kIterations = 8000;
  int parsed = 0, rendered = 0;
  for (int i = 0; i < kIterations; ++i) {
    std::string src = Mutate(templates[rng() % templates.size()], rng);
    auto t = ChatTemplate::Parse(src);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++parsed;
    auto r = t->Render(contexts[rng() % contexts.size()], limits);
    if (r.ok()) {
      ++rendered;
      EXPECT_LE(r->size(), limits.max_output_bytes);
    } else {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  std::cout << "fuzz: " << kIterations << " mutants, " << parsed << " parsed, " << rendered
            << " rendered\n";
}

TEST(ChatTemplateFuzz, HostileTemplatesHitLimits) {
  const char* const kHostile[] = {
      "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(0) }}",
      "{% set ns = namespace(x=[1]) %}{% for i in range(40) %}{% set ns.x = [ns.x, ns.x] %}"
      "{% endfor %}{{ ns.x }}",
      "{{ ('ab' * 40000).replace('', 'xxxxxxxxxxxxxxxxxxx') }}",
      "{{ 'a\n' * 5000 | indent(1000) }}",
      "{% for i in range(999999999) %}{% endfor %}",
      "{{ 2 ** 64 }}{{ 9223372036854775807 + 1 }}",
      "{{ [1] * 999999999 }}",
      "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}"
      "{% endfor %}{{ ns.x }}",
      "{% set ns = namespace(x={}) %}{% for i in range(5000) %}{% set ns.x = dict(a=ns.x) %}"
      "{% endfor %}{{ ns.x | tojson }}",
      "{% set ns = namespace(x={'a': 1}) %}{% for i in range(5000) %}"
      "{% set ns.x = dict(k=ns.x | items | list) %}{% endfor %}{{ ns.x == ns.x }}",
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}",
  };
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_loop_iterations = 100000;
  for (const char* src : kHostile) {
    SCOPED_TRACE(src);
    auto t = ChatTemplate::Parse(src);
    ASSERT_TRUE(t.ok()) << t.status();
    auto r = t->Render(nlohmann::ordered_json::object(), limits);
    EXPECT_FALSE(r.ok());
  }
  // Deepest nesting the parser allows, inside the deepest macro recursion: must fail cleanly
  // rather than overflow the stack.
  std::string deep = "{% macro f(n) %}{{ " + std::string(60, '[') + "f(n + 1)" +
                     std::string(60, ']') + " }}{% endmacro %}{{ f(0) }}";
  auto deep_tmpl = ChatTemplate::Parse(deep);
  ASSERT_TRUE(deep_tmpl.ok()) << deep_tmpl.status();
  EXPECT_FALSE(deep_tmpl->Render(nlohmann::ordered_json::object()).ok());

  // A context nested deeper than the limit is refused before it is converted.
  nlohmann::ordered_json nested = nlohmann::ordered_json::array();
  for (int i = 0; i < 1000; ++i) nested = nlohmann::ordered_json::array({nested});
  auto plain = ChatTemplate::Parse("{{ messages }}");
  ASSERT_TRUE(plain.ok());
  auto refused = plain->Render(nlohmann::ordered_json{{"messages", nested}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("nested deeper"), std::string::npos);

  // A namespace that contains itself prints nested copies shallowly instead of recursing.
  auto t = ChatTemplate::Parse("{% set ns = namespace() %}{% set ns.a = [ns, ns] %}{{ ns }}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(nlohmann::ordered_json::object(), limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "<Namespace {'a': [<Namespace {...}>, <Namespace {...}>]}>");
}

}  // namespace
}  // namespace tandem::chat_template
