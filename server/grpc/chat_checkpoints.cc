#include "server/grpc/chat_checkpoints.h"

#include <algorithm>
#include <string>

namespace tandem::server {
namespace {

bool IsSystemRole(const nlohmann::ordered_json& message) {
  if (!message.is_object() || !message.contains("role")) return false;
  const auto& role = message["role"];
  return role.is_string() && (role == "system" || role == "developer");
}

// The token count of the conversation's first `count` messages, rendered without a generation
// prompt, when that is a prefix of the full prompt in text and in tokens; 0 otherwise.
size_t BoundaryAfter(size_t count, const ChatTemplate& chat_template,
                     const models::Tokenizer& tokenizer, const ChatVariables& variables,
                     const chat_template::RenderedPrompt& rendered,
                     const std::vector<int32_t>& prompt) {
  ChatVariables shorter = variables;
  nlohmann::ordered_json& messages = shorter.untrusted["messages"];
  messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(count), messages.end());
  shorter.trusted["add_generation_prompt"] = false;
  absl::StatusOr<chat_template::RenderedPrompt> part =
      chat_template.RenderTracked(shorter.trusted, shorter.untrusted);
  if (!part.ok() || part->text.empty() || part->text.size() > rendered.text.size() ||
      rendered.text.compare(0, part->text.size(), part->text) != 0) {
    return 0;
  }
  absl::StatusOr<std::vector<int32_t>> ids = EncodeRenderedChat(tokenizer, *part);
  if (!ids.ok() || ids->empty() || ids->size() > prompt.size() ||
      !std::equal(ids->begin(), ids->end(), prompt.begin())) {
    return 0;
  }
  return ids->size();
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> EncodeRenderedChat(const models::Tokenizer& tokenizer,
                                                        const chat_template::RenderedPrompt& chat) {
  std::vector<models::TextRange> plain;
  plain.reserve(chat.untrusted.size());
  for (const chat_template::ByteRange& r : chat.untrusted) plain.push_back({r.begin, r.end});
  return tokenizer.EncodeWithPlainRanges(chat.text, plain, false);
}

std::vector<size_t> ChatCheckpointHints(const ChatTemplate& chat_template,
                                        const models::Tokenizer& tokenizer,
                                        const ChatVariables& variables,
                                        const chat_template::RenderedPrompt& rendered,
                                        const std::vector<int32_t>& prompt) {
  std::vector<size_t> hints;
  if (prompt.empty()) return hints;
  hints.push_back(prompt.size());
  const auto messages_it = variables.untrusted.find("messages");
  if (messages_it == variables.untrusted.end() || !messages_it->is_array()) return hints;
  const nlohmann::ordered_json& messages = *messages_it;
  size_t system_count = 0;
  while (system_count < messages.size() && IsSystemRole(messages[system_count])) ++system_count;
  for (size_t count : {system_count, messages.size() - 1}) {
    if (count == 0 || count >= messages.size()) continue;
    if (size_t at = BoundaryAfter(count, chat_template, tokenizer, variables, rendered, prompt)) {
      hints.push_back(at);
    }
  }
  std::sort(hints.begin(), hints.end());
  hints.erase(std::unique(hints.begin(), hints.end()), hints.end());
  return hints;
}

}  // namespace tandem::server
