#include "server/reasoning/reasoning_support.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace tandem::server {
namespace {

// Prompt tokens decoded to see whether the prompt ends with the start marker: a marker is a
// token or a few, and trailing whitespace a few more.
constexpr size_t kTailTokens = 16;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// The id of the one token `marker` is, or -1. A vocabulary entry spelled so (an added token,
// special or not) first: encoded alone, a marker may gain a prefix space (SentencePiece's dummy
// "▁", a Prepend normaliser) that the model does not write before it. Otherwise what encoding
// it gives, if that is one id. (An ordinary merged token so spelled is taken too, though a model
// may also write the marker in pieces; reasoning models add their markers as tokens.)
int32_t SingleTokenId(const models::Tokenizer& tokenizer, std::string_view marker) {
  if (marker.empty()) return -1;
  const int32_t piece = tokenizer.PieceToId(marker);
  if (piece >= 0 && piece != tokenizer.unk_id()) return piece;
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(marker, /*add_special_tokens=*/false);
  return ids.ok() && ids->size() == 1 && ids->front() != tokenizer.unk_id() ? ids->front() : -1;
}

}  // namespace

ReasoningSupport::ReasoningSupport(const models::Tokenizer* tokenizer,
                                   std::optional<ReasoningFormat> configured)
    : tokenizer_(tokenizer),
      configured_(configured.has_value()),
      format_(configured.value_or(tokenizer == nullptr
                                      ? ReasoningFormat::kNone
                                      : DetectReasoningFormat(tokenizer->config().chat_template))) {
  if (tokenizer == nullptr) return;
  const ReasoningMarkers markers = ReasoningMarkersOf(format_);
  special_markers_ = models::SpecialTokenIds(*tokenizer, {markers.start, markers.end});
  marker_tokens_.start_token = SingleTokenId(*tokenizer, markers.start);
  marker_tokens_.end_token = SingleTokenId(*tokenizer, markers.end);
}

std::optional<ReasoningUse> ReasoningSupport::Apply(engine::Request* request) const {
  if (format_ == ReasoningFormat::kNone || tokenizer_ == nullptr || request->grammar != nullptr) {
    return std::nullopt;
  }
  for (int32_t id : special_markers_) {
    if (std::find(request->shown_special_tokens.begin(), request->shown_special_tokens.end(), id) ==
        request->shown_special_tokens.end()) {
      request->shown_special_tokens.push_back(id);
    }
  }
  const std::vector<int32_t>& prompt = request->prompt;
  const size_t tail = std::min(prompt.size(), kTailTokens);
  std::string text = tokenizer_->Decode(absl::MakeConstSpan(prompt).subspan(prompt.size() - tail),
                                        /*skip_special_tokens=*/false);
  while (!text.empty() && IsSpace(text.back())) text.pop_back();
  const bool opened = std::string_view(text).ends_with(ReasoningMarkersOf(format_).start);
  engine::ReasoningBlock block = marker_tokens_;
  block.opened = opened;
  request->reasoning_block = block;  // its tokens are counted (Usage::reasoning_tokens)
  return ReasoningUse{format_, opened};
}

}  // namespace tandem::server
