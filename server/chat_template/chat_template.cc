#include "server/chat_template/chat_template.h"

#include "absl/strings/str_cat.h"
#include "server/chat_template/interpreter.h"
#include "server/chat_template/parser.h"
#include "server/chat_template/status_macros.h"

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

namespace {

// Stops at `max` levels, so the check itself recurses boundedly.
template <typename Json>
bool NestedDeeperThan(const Json& j, int max) {
  if (!j.is_structured()) return false;
  if (max <= 0) return true;
  for (const auto& child : j) {
    if (NestedDeeperThan(child, max - 1)) return true;
  }
  return false;
}

}  // namespace

template <typename Json>
absl::StatusOr<Text> ChatTemplate::RenderImpl(const Json& trusted, const Json* untrusted,
                                              const RenderLimits& limits) const {
  Dict globals;
  for (const auto& [context, is_untrusted] :
       {std::pair{untrusted, true}, std::pair{&trusted, false}}) {
    if (context == nullptr) continue;
    if (!context->is_object() && !context->is_null()) {
      return absl::InvalidArgumentError("chat template context must be a JSON object");
    }
    if (NestedDeeperThan(*context, limits.max_nesting_depth)) {
      return absl::InvalidArgumentError(absl::StrCat("chat template context nested deeper than ",
                                                     limits.max_nesting_depth, " levels"));
    }
    if (!context->is_object()) continue;
    for (auto it = context->begin(); it != context->end(); ++it) {
      globals.Set(it.key(), Value::FromJson(it.value(), is_untrusted));
    }
  }
  Interpreter interpreter(limits, std::move(globals));
  return interpreter.Render(parsed_->body);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context,
                                                 const RenderLimits& limits) const {
  TMPL_ASSIGN_OR_RETURN(Text out,
                        RenderImpl<std::decay_t<decltype(context)>>(context, nullptr, limits));
  return std::move(out.text);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context,
                                                 const RenderLimits& limits) const {
  TMPL_ASSIGN_OR_RETURN(Text out,
                        RenderImpl<std::decay_t<decltype(context)>>(context, nullptr, limits));
  return std::move(out.text);
}

absl::StatusOr<RenderedPrompt> ChatTemplate::RenderTracked(const nlohmann::ordered_json& trusted,
                                                           const nlohmann::ordered_json& untrusted,
                                                           const RenderLimits& limits) const {
  TMPL_ASSIGN_OR_RETURN(Text out, RenderImpl(trusted, &untrusted, limits));
  return RenderedPrompt{std::move(out.text), out.taint.ranges()};
}

}  // namespace tandem::chat_template
