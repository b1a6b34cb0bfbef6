#include "server/tools/tool_call_support.h"

#include <memory>
#include <string_view>
#include <utility>

#include "server/tools/forced_tool_calls.h"

namespace tandem::server {

ToolCallSupport::ToolCallSupport(const models::Tokenizer* tokenizer,
                                 std::optional<ToolCallFormat> configured)
    : has_tokenizer_(tokenizer != nullptr),
      configured_(configured.has_value()),
      format_(configured.value_or(tokenizer == nullptr
                                      ? ToolCallFormat::kNone
                                      : DetectToolCallFormat(tokenizer->config().chat_template))) {
  if (tokenizer == nullptr) return;
  const ToolCallMarkers markers = MarkersOf(format_);
  special_markers_ = models::SpecialTokenIds(*tokenizer, {markers.start, markers.end});
}

absl::Status ToolCallSupport::Apply(const ToolUse& use, engine::GrammarCache& grammars,
                                    engine::Request* request) const {
  if (!use.parse) return absl::OkStatus();
  if (!has_tokenizer_) {
    return absl::InvalidArgumentError("tools: the model has no tokenizer to read calls with");
  }
  request->shown_special_tokens.insert(request->shown_special_tokens.end(),
                                       special_markers_.begin(), special_markers_.end());
  if (!use.forced) return absl::OkStatus();
  // Agents send the same tools with every turn: compiled once (engine/grammar_cache.h).
  absl::StatusOr<std::shared_ptr<const engine::Grammar>> grammar = grammars.GetOrCompile(
      ForcedToolCallKey(format_, use.tools, use.only, use.parallel),
      [&] { return ForcedToolCallGrammar(format_, use.tools, use.only, use.parallel); });
  if (!grammar.ok()) return grammar.status();
  request->grammar = *std::move(grammar);
  return absl::OkStatus();
}

}  // namespace tandem::server
