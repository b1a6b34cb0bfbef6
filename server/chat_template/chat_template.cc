#include "server/chat_template/chat_template.h"

#include "server/chat_template/interpreter.h"
#include "server/chat_template/parser.h"

namespace tandem::chat_template {

struct ChatTemplate::Parsed {
  Body body;
};

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  auto body = ParseTemplate(source);
  if (!body.ok()) return body.status();
  auto parsed = std::make_shared<Parsed>();
  parsed->body = std::move(*body);
  return ChatTemplate(std::move(parsed));
}

template <typename Json>
absl::StatusOr<std::string> ChatTemplate::RenderImpl(const Json& context,
                                                     const RenderLimits& limits) const {
  if (!context.is_object() && !context.is_null()) {
    return absl::InvalidArgumentError("chat template context must be a JSON object");
  }
  Dict globals;
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      globals.Set(it.key(), Value::FromJson(it.value()));
    }
  }
  Interpreter interpreter(limits, std::move(globals));
  return interpreter.Render(parsed_->body);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context,
                                                 const RenderLimits& limits) const {
  return RenderImpl(context, limits);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context,
                                                 const RenderLimits& limits) const {
  return RenderImpl(context, limits);
}

}  // namespace tandem::chat_template
