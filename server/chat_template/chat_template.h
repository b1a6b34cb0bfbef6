// A Hugging Face chat template (tokenizer_config.json's "chat_template"), parsed once and
// rendered per request. The engine implements the Jinja2 subset that published chat
// templates use, with the settings transformers renders them under (trim_blocks,
// lstrip_blocks, immutable sandbox, tojson without HTML escaping, raise_exception,
// strftime_now); its output is byte-identical to Python's jinja2 on the corpus in
// tests/data/chat_templates.
//
//   auto tmpl = ChatTemplate::Parse(config["chat_template"]);
//   auto prompt = tmpl->Render({{"messages", messages}, {"add_generation_prompt", true},
//                               {"bos_token", "<s>"}, {"eos_token", "</s>"}});
//
// Errors are absl::InvalidArgumentError: parse errors name the line, column and what was
// expected; render errors name the line and the cause (raise_exception's message, unknown
// filter, type error, undefined value used, a limit in RenderLimits exceeded).
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_CHAT_TEMPLATE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/chat_template/limits.h"
#include "server/chat_template/provenance.h"

namespace tandem::chat_template {

struct Stmt;

// A rendering and the byte ranges of it that came from untrusted variables (provenance.h).
struct RenderedPrompt {
  std::string text;
  std::vector<ByteRange> untrusted;  // sorted, disjoint
};

class ChatTemplate {
 public:
  static absl::StatusOr<ChatTemplate> Parse(std::string source);

  // `context` must be a JSON object; its keys become the template's variables. Pass an
  // ordered_json to keep object keys in document order (tojson prints them in that order,
  // as Python does); nlohmann::json sorts them.
  absl::StatusOr<std::string> Render(const nlohmann::json& context,
                                     const RenderLimits& limits = {}) const;
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                                     const RenderLimits& limits = {}) const;

  // Renders with two kinds of variables: `trusted` ones the server sets (bos_token,
  // add_generation_prompt, ...) and `untrusted` ones whose strings, keys included, the client
  // wrote (messages, tools, documents, template kwargs). Both must be JSON objects; where a
  // name is in both, the trusted value wins. The result says which bytes came from untrusted
  // strings, however the template cut and joined them (conservatively: never fewer).
  absl::StatusOr<RenderedPrompt> RenderTracked(const nlohmann::ordered_json& trusted,
                                               const nlohmann::ordered_json& untrusted,
                                               const RenderLimits& limits = {}) const;

 private:
  struct Parsed;
  explicit ChatTemplate(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
  template <typename Json>
  absl::StatusOr<Text> RenderImpl(const Json& trusted, const Json* untrusted,
                                  const RenderLimits& limits) const;
  std::shared_ptr<const Parsed> parsed_;  // immutable, so copies and threads share it
};

}  // namespace tandem::chat_template

namespace tandem {
using chat_template::ChatTemplate;
}

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
