#include "server/grpc/pinned_prefix_request.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc/pinned_prefixes.h"

namespace tandem::server {
namespace {

// The conversation fields of `chat`, nothing else (sampling, ids and the rest play no part in
// a prefix).
v1::ChatRequest ConversationOf(const v1::ChatRequest& chat) {
  v1::ChatRequest out;
  *out.mutable_messages() = chat.messages();
  *out.mutable_tools() = chat.tools();
  *out.mutable_documents() = chat.documents();
  if (chat.has_chat_template_kwargs()) {
    *out.mutable_chat_template_kwargs() = chat.chat_template_kwargs();
  }
  return out;
}

// An error of BuildChatRequest, its field named within PinPrefixRequest.
absl::Status InChat(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("chat.", status.message()));
}

absl::StatusOr<std::vector<int32_t>> ChatPrefixTokens(const v1::ChatRequest& chat,
                                                      const ValidationContext& context) {
  v1::ChatRequest prefix = ConversationOf(chat);
  prefix.set_add_generation_prompt(false);
  absl::StatusOr<engine::Request> pinned = BuildChatRequest(prefix, context);
  if (!pinned.ok()) return InChat(pinned.status());
  // A later turn: the message that would come next, and the generation prompt after it.
  v1::ChatRequest later = ConversationOf(chat);
  const bool after_user =
      !chat.messages().empty() && chat.messages(chat.messages_size() - 1).role() == "user";
  v1::ChatMessage* next = later.add_messages();
  next->set_role(after_user ? "assistant" : "user");
  next->set_content("Hello.");
  later.set_add_generation_prompt(!after_user);
  // Its length is no concern of the pin's: a prefix near the prompt cap still pins.
  ValidationContext roomy = context;
  roomy.limits.max_prompt_tokens += 256;
  roomy.limits.max_request_bytes += 1024;
  absl::StatusOr<engine::Request> continued = BuildChatRequest(later, roomy);
  const std::vector<int32_t>& ids = pinned->prompt;
  if (!continued.ok() || continued->prompt.size() <= ids.size() ||
      !std::equal(ids.begin(), ids.end(), continued->prompt.begin())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "chat: the chat template does not render these messages as the start of a longer "
        "conversation token for token",
        continued.ok() ? "" : absl::StrCat(" (", continued.status().message(), ")"),
        ", so no later Chat call would restore them; pin its text or token_ids instead"));
  }
  return pinned->prompt;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> PrefixTokens(const v1::PinPrefixRequest& request,
                                                  const ValidationContext& context) {
  if (absl::Status s = ValidatePrefixName(request.name()); !s.ok()) return s;
  v1::GenerateRequest as_generate;
  switch (request.prefix_case()) {
    case v1::PinPrefixRequest::kText:
      as_generate.set_text(request.text());
      if (request.has_add_special_tokens()) {
        as_generate.set_add_special_tokens(request.add_special_tokens());
      }
      break;
    case v1::PinPrefixRequest::kTokenIds:
      *as_generate.mutable_token_ids() = request.token_ids();
      break;
    case v1::PinPrefixRequest::kChat:
      return ChatPrefixTokens(request.chat(), context);
    case v1::PinPrefixRequest::PREFIX_NOT_SET:
      return absl::InvalidArgumentError("prefix: one of text, token_ids or chat is required");
  }
  std::vector<int32_t> tokens;
  if (absl::Status s = ConvertPrompt(as_generate, context, &tokens); !s.ok()) return s;
  if (tokens.empty()) {
    return absl::InvalidArgumentError(request.prefix_case() == v1::PinPrefixRequest::kText
                                          ? "text: tokenizes to no tokens"
                                          : "token_ids.ids: no tokens");
  }
  return tokens;
}

}  // namespace tandem::server
