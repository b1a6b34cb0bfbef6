#include "server/openai/openai_response.h"

#include <utility>

namespace tandem::server {
namespace {

using json = nlohmann::json;

json Envelope(const CompletionShape& shape, bool chunk) {
  const char* object =
      shape.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", shape.id}, {"object", object}, {"created", shape.created}, {"model", shape.model}};
}

json NullableReason(const char* finish_reason) {
  return finish_reason == nullptr ? json(nullptr) : json(finish_reason);
}

json ToolCallsJson(const std::vector<ToolCall>& calls, int first_index, bool indexed) {
  json list = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", NewToolCallId()},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) call["index"] = first_index + static_cast<int>(i);
    list.push_back(std::move(call));
  }
  return list;
}

json UsageJson(const engine::Usage& usage) {
  json out = {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
              // Drafts from the request's prediction (or, with --prompt-lookup, its own text).
              {"completion_tokens_details",
               {{"accepted_prediction_tokens", usage.accepted_draft_tokens},
                {"rejected_prediction_tokens", usage.rejected_draft_tokens}}}};
  // Left out where the model's reasoning markers are not single tokens (not countable).
  if (usage.reasoning_tokens) {
    out["completion_tokens_details"]["reasoning_tokens"] = *usage.reasoning_tokens;
  }
  return out;
}

}  // namespace

const char* OpenAiFinishReason(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kLength:
      return "length";
    case engine::FinishReason::kStop:
      return "stop";
    default:
      return "abort";
  }
}

const char* ChatFinishReason(engine::FinishReason reason, size_t calls) {
  return calls > 0 && reason == engine::FinishReason::kStop ? "tool_calls"
                                                            : OpenAiFinishReason(reason);
}

AnswerStream NewAnswerStream(const CompletionShape& shape) {
  if (!shape.chat) return AnswerStream(std::nullopt, std::nullopt);
  return AnswerStream::For(shape.reasoning, shape.tool_call_format, shape.tools);
}

json ChoiceJson(const CompletionShape& shape, int index, const std::string& text,
                const engine::Event& finished, json logprobs) {
  json choice = {{"index", index}};
  const char* finish_reason = OpenAiFinishReason(finished.finish_reason);
  if (shape.chat) {
    bool reasoned = false;
    AnswerPiece parsed = ParseAnswer(NewAnswerStream(shape), text, &reasoned);
    json message = {{"role", "assistant"}, {"content", parsed.content}};
    if (shape.reasoning) {
      message["reasoning_content"] = reasoned ? json(parsed.reasoning) : json(nullptr);
    }
    if (!parsed.calls.empty()) {
      if (parsed.content.empty()) message["content"] = nullptr;
      message["tool_calls"] = ToolCallsJson(parsed.calls, 0, /*indexed=*/false);
    }
    choice["message"] = std::move(message);
    finish_reason = ChatFinishReason(finished.finish_reason, parsed.calls.size());
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason;
  return choice;
}

json CompletionJson(const CompletionShape& shape, json choices, const engine::Usage& usage) {
  json out = Envelope(shape, /*chunk=*/false);
  out["choices"] = std::move(choices);
  out["usage"] = UsageJson(usage);
  return out;
}

json ChunkJson(const CompletionShape& shape, int index, const std::string& text, bool role,
               const char* finish_reason, json logprobs, const std::string& reasoning) {
  json choice = {{"index", index}};
  if (shape.chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!text.empty() || role) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = NullableReason(finish_reason);
  json out = Envelope(shape, /*chunk=*/true);
  out["choices"] = json::array({std::move(choice)});
  if (shape.usage_in_chunks) out["usage"] = nullptr;
  return out;
}

json ToolCallChunkJson(const CompletionShape& shape, int index, const std::vector<ToolCall>& calls,
                       int first_index) {
  json choice = {{"index", index},
                 {"delta", {{"tool_calls", ToolCallsJson(calls, first_index, /*indexed=*/true)}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  json out = Envelope(shape, /*chunk=*/true);
  out["choices"] = json::array({std::move(choice)});
  if (shape.usage_in_chunks) out["usage"] = nullptr;
  return out;
}

json UsageChunkJson(const CompletionShape& shape, const engine::Usage& usage) {
  json out = Envelope(shape, /*chunk=*/true);
  out["choices"] = json::array();
  out["usage"] = UsageJson(usage);
  return out;
}

}  // namespace tandem::server
