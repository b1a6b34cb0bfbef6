// `tandem render-template`: a developer tool that renders a chat template file with a JSON
// context through tandem's own Jinja engine, so tools/chat_templates/check_published.py can
// compare it with Python's jinja2. The output is the rendering's exact bytes on stdout (no
// newline added); a template error goes to stderr with exit status 1.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "server/chat_template/chat_template.h"
#include "server/cli/args.h"
#include "server/cli/commands.h"

namespace tandem::cli {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return !in.bad();
}

}  // namespace

int RunRenderTemplate(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"template", true, "the Jinja chat template file"},
      {"context", true, "a JSON object file: the template's variables"},
      {"untrusted", true,
       "comma-separated context keys whose strings count as client-written (default: all but "
       "bos_token, eos_token and add_generation_prompt)"},
      {"provenance", false,
       "print {\"text\": ..., \"untrusted\": [[begin, end], ...]} instead of the text"},
      {"help", false, "show this help"}};
  const std::string synopsis = "--template FILE --context FILE [--provenance]";
  auto args = Args::Parse(argc, argv, specs);
  if (!args.ok() || args->Has("help") || !args->Has("template") || !args->Has("context")) {
    if (!args.ok()) std::cerr << "tandem render-template: " << args.status().message() << "\n\n";
    std::cout << Usage("render-template", synopsis, specs);
    return args.ok() && args->Has("help") ? 0 : 2;
  }
  std::string source, context_text;
  for (const auto& [flag, out] : {std::pair{"template", &source}, {"context", &context_text}}) {
    if (!ReadFile(*args->String(flag), out)) {
      std::cerr << "tandem render-template: cannot read " << *args->String(flag) << "\n";
      return 2;
    }
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_text, nullptr, false);
  if (!context.is_object()) {
    std::cerr << "tandem render-template: " << *args->String("context")
              << " is not a JSON object\n";
    return 2;
  }
  nlohmann::ordered_json trusted = nlohmann::ordered_json::object();
  nlohmann::ordered_json untrusted = nlohmann::ordered_json::object();
  std::vector<std::string> untrusted_keys;
  if (args->Has("untrusted")) untrusted_keys = absl::StrSplit(*args->String("untrusted"), ',');
  for (auto it = context.begin(); it != context.end(); ++it) {
    const std::string& key = it.key();
    bool is_untrusted =
        args->Has("untrusted")
            ? std::find(untrusted_keys.begin(), untrusted_keys.end(), key) != untrusted_keys.end()
            : key != "bos_token" && key != "eos_token" && key != "add_generation_prompt";
    (is_untrusted ? untrusted : trusted)[key] = it.value();
  }
  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) {
    std::cerr << tmpl.status().message() << "\n";
    return 1;
  }
  auto rendered = tmpl->RenderTracked(trusted, untrusted);
  if (!rendered.ok()) {
    std::cerr << rendered.status().message() << "\n";
    return 1;
  }
  if (args->Has("provenance")) {
    nlohmann::ordered_json out = {{"text", rendered->text},
                                  {"untrusted", nlohmann::ordered_json::array()}};
    for (const auto& r : rendered->untrusted) out["untrusted"].push_back({r.begin, r.end});
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << rendered->text;
  }
  return 0;
}

}  // namespace tandem::cli
