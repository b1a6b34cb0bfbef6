// Renders every template of tests/data/chat_templates with every context and compares the
// bytes with what Python's jinja2 (configured as transformers configures it) produced; see
// tools/chat_templates/render_fixtures.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/chat_template/chat_template.h"

namespace tandem::chat_template {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kRoot = fs::path(TANDEM_TEST_DATA) / "chat_templates";

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<fs::path> Templates() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kRoot / "templates")) {
    if (e.path().extension() == ".jinja") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ChatTemplateFixtures, EveryCaseMatchesJinja2ByteForByte) {
  int cases = 0, errors = 0;
  const auto templates = Templates();
  ASSERT_GE(templates.size(), 10u);
  for (const fs::path& path : templates) {
    SCOPED_TRACE(path.filename().string());
    auto tmpl = ChatTemplate::Parse(ReadFile(path));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    auto expected = nlohmann::ordered_json::parse(
        ReadFile(kRoot / "expected" / (path.stem().string() + ".json")));
    ASSERT_FALSE(expected.empty());
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      SCOPED_TRACE(it.key());
      auto context =
          nlohmann::ordered_json::parse(ReadFile(kRoot / "contexts" / (it.key() + ".json")));
      auto rendered = tmpl->Render(context);
      ++cases;
      const auto& want = it.value();
      if (want.contains("output")) {
        ASSERT_TRUE(rendered.ok()) << rendered.status();
        EXPECT_EQ(*rendered, want["output"].get<std::string>());
      } else {
        ++errors;
        ASSERT_FALSE(rendered.ok()) << "jinja2 raised: " << want["error"];
        if (want["raised"].get<bool>()) {
          EXPECT_THAT(std::string(rendered.status().message()),
                      HasSubstr(want["error"].get<std::string>()));
        }
      }
    }
  }
  std::cout << "chat template fixtures: " << templates.size() << " templates, " << cases
            << " cases (" << errors << " expected errors)\n";
  EXPECT_GE(cases, 100);
}

TEST(ChatTemplateFixtures, TemplatesJinja2RefusesAreRefused) {
  auto invalid = nlohmann::ordered_json::parse(ReadFile(kRoot / "expected" / "invalid.json"));
  ASSERT_GE(invalid.size(), 30u);
  for (const auto& c : invalid) {
    const std::string src = c["template"].get<std::string>();
    SCOPED_TRACE(src + "  (jinja2: " + c["error"].get<std::string>() + ")");
    auto tmpl = ChatTemplate::Parse(src);
    absl::Status status = tmpl.status();
    if (tmpl.ok()) status = tmpl->Render(nlohmann::ordered_json::object()).status();
    ASSERT_FALSE(status.ok());
    EXPECT_THAT(std::string(status.message()), HasSubstr("line "));
  }
}

}  // namespace
}  // namespace tandem::chat_template
