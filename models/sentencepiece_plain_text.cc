#include "models/sentencepiece_plain_text.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "models/sentencepiece_model_proto.h"
#include "models/unicode_utf8.h"

namespace tandem::models {
namespace {

// 0xFF never occurs in UTF-8; sentencepiece reads a byte >= 0xF0 as the first of a four-byte
// character, so the sentinel stays one unit. The other three bytes number the piece.
std::string Sentinel(size_t k) {
  return std::string{static_cast<char>(0xFF), static_cast<char>(0x80 | ((k >> 12) & 0x3F)),
                     static_cast<char>(0x80 | ((k >> 6) & 0x3F)),
                     static_cast<char>(0x80 | (k & 0x3F))};
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpPlainTextEncoder>> SpPlainTextEncoder::Create(
    std::string_view serialized_model, const std::vector<bool>& special) {
  std::optional<std::vector<SpPiece>> pieces = ReadSpPieces(serialized_model);
  if (!pieces) return absl::InvalidArgumentError("cannot read the SentencePiece model's pieces");
  auto encoder = std::unique_ptr<SpPlainTextEncoder>(new SpPlainTextEncoder());
  std::map<int32_t, std::string> renames;
  for (size_t id = 0; id < pieces->size(); ++id) {
    const SpPiece& p = (*pieces)[id];
    if (p.type != SpPieceType::kUserDefined || p.piece.empty()) continue;
    Piece piece{p.piece, ""};
    if (id < special.size() && special[id]) {
      piece.sentinel = Sentinel(renames.size());
      renames[static_cast<int32_t>(id)] = piece.sentinel;
    }
    encoder->user_defined_.push_back(std::move(piece));
  }
  if (renames.empty()) return std::unique_ptr<SpPlainTextEncoder>();
  std::stable_sort(
      encoder->user_defined_.begin(), encoder->user_defined_.end(),
      [](const Piece& a, const Piece& b) { return a.spelling.size() > b.spelling.size(); });
  std::optional<std::string> renamed = RenameSpPieces(serialized_model, renames);
  if (!renamed) return absl::InvalidArgumentError("cannot rewrite the SentencePiece model");
  std::string error;
  encoder->backend_ = SentencePieceBackend::Load(*renamed, &error);
  if (encoder->backend_ == nullptr) {
    return absl::InternalError(absl::StrCat("plain-text SentencePiece model: ", error));
  }
  return encoder;
}

std::optional<std::string> SpPlainTextEncoder::Rewrite(std::string_view text,
                                                       absl::Span<const TextRange> plain) const {
  // Any occurrence at all, wherever sentencepiece's own scan would find it, that touches a
  // plain range sends the text down the rewriting path; deciding this generously is safe.
  bool touched = false;
  for (const Piece& p : user_defined_) {
    if (p.sentinel.empty()) continue;
    for (size_t at = text.find(p.spelling); at != std::string_view::npos && !touched;
         at = text.find(p.spelling, at + 1)) {
      touched = Touches(plain, at, at + p.spelling.size());
    }
    if (touched) break;
  }
  if (!touched) return std::nullopt;
  // Replace the occurrences outside the plain ranges, scanning as sentencepiece's normalizer
  // does: the longest user-defined piece at each character, else one character on.
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const Piece* match = nullptr;
    for (const Piece& p : user_defined_) {
      if (text.compare(i, p.spelling.size(), p.spelling) == 0) {
        match = &p;
        break;
      }
    }
    if (match != nullptr) {
      const size_t end = i + match->spelling.size();
      const bool keep = !match->sentinel.empty() && !Touches(plain, i, end);
      out += keep ? match->sentinel : match->spelling;
      i = end;
      continue;
    }
    const size_t n = std::max<size_t>(1, Utf8SequenceLength(text, i));
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace tandem::models
