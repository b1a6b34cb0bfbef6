#include "models/tokenizer_sentencepiece.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/sentencepiece_backend.h"
#include "models/sentencepiece_plain_text.h"
#include "models/unicode_utf8.h"

namespace tandem::models {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁"

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<SentencePieceBackend> sp, const TokenizerConfig& config)
      : sp_(std::move(sp)) {
    config_ = config;
    const auto lookup = [&](const std::string& token, int32_t fallback) {
      if (token.empty()) return fallback;
      const int32_t id = sp_->PieceToId(token);
      // PieceToId answers unk for unknown strings; trust it only when the piece really is it.
      return (id >= 0 && sp_->IdToPiece(id) == token) ? id : fallback;
    };
    bos_id_ = lookup(config.bos_token, sp_->bos_id());
    eos_id_ = lookup(config.eos_token, sp_->eos_id());
    pad_id_ = lookup(config.pad_token, sp_->pad_id());
    unk_id_ = lookup(config.unk_token, sp_->unk_id());
    add_bos_ = config.add_bos_token.value_or(true) && bos_id_ >= 0;
    add_eos_ = config.add_eos_token.value_or(false) && eos_id_ >= 0;
    special_.assign(sp_->piece_size(), false);
    for (int32_t id = 0; id < sp_->piece_size(); ++id) {
      special_[id] = sp_->IsControl(id) || sp_->IsUnknown(id);
    }
    for (int32_t id : {bos_id_, eos_id_, pad_id_, unk_id_}) {
      if (id >= 0) special_[id] = true;
    }
    for (const auto& [id, token] : config.added_tokens) {
      if (token.special && id < sp_->piece_size() && sp_->IdToPiece(id) == token.content) {
        special_[id] = true;
      }
    }
  }

  // Builds the plain-text encoder (sentencepiece_plain_text.h) once the special ids are known.
  absl::Status InitPlainText(std::string_view serialized_model) {
    absl::StatusOr<std::unique_ptr<SpPlainTextEncoder>> plain =
        SpPlainTextEncoder::Create(serialized_model, special_);
    if (!plain.ok()) return plain.status();
    plain_ = *std::move(plain);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special_tokens) const override {
    return EncodeRanges(text, {}, add_special_tokens);
  }

  std::string Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const override {
    std::vector<int32_t> kept;
    kept.reserve(ids.size());
    for (int32_t id : ids) {
      if (id < 0 || id >= sp_->piece_size()) continue;
      if (skip_special_tokens && special_[id]) continue;
      kept.push_back(id);
    }
    std::string text, error;
    if (!sp_->Decode(kept, &text, &error)) return "";  // unreachable: every id is in range
    return text;
  }

  std::string TokenToPiece(int32_t id) const override {
    if (id < 0 || id >= sp_->piece_size()) return "";
    return sp_->IdToPiece(id);
  }

  std::string TokenBytes(int32_t id) const override {
    if (id < 0 || id >= sp_->piece_size() || sp_->IsControl(id)) return "";
    if (sp_->IsUnknown(id)) return " \xE2\x81\x87 ";  // sentencepiece's unknown surface " ⁇ "
    const std::string piece = sp_->IdToPiece(id);
    unsigned char byte;
    if (sp_->IsByte(id) && ParseByteFallbackPiece(piece, &byte)) {
      return std::string(1, static_cast<char>(byte));
    }
    std::string out;
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, kSpace.size(), kSpace) == 0) {
        out.push_back(' ');
        i += kSpace.size();
      } else {
        out.push_back(piece[i++]);
      }
    }
    return out;
  }

  bool strips_leading_space() const override { return sp_->strips_leading_space(); }

  int32_t PieceToId(std::string_view piece) const override {
    const int32_t id = sp_->PieceToId(piece);
    return (id >= 0 && sp_->IdToPiece(id) == piece) ? id : -1;
  }

  int32_t vocab_size() const override { return sp_->piece_size(); }
  bool IsSpecial(int32_t id) const override {
    return id >= 0 && id < sp_->piece_size() && special_[id];
  }

 private:
  absl::StatusOr<std::vector<int32_t>> EncodeRanges(std::string_view text,
                                                    absl::Span<const TextRange> plain,
                                                    bool add_special_tokens) const override {
    if (!IsValidUtf8(text)) return absl::InvalidArgumentError("text is not valid UTF-8");
    std::vector<int32_t> ids;
    std::string error;
    // Only when a special piece's spelling reaches into a plain range does the text take the
    // plain-text model; otherwise this is sentencepiece's encoding of the text as it is.
    std::optional<std::string> rewritten;
    if (!plain.empty() && plain_ != nullptr) rewritten = plain_->Rewrite(text, plain);
    const bool ok = rewritten ? plain_->backend().Encode(*rewritten, &ids, &error)
                              : sp_->Encode(text, &ids, &error);
    if (!ok) return absl::InternalError(absl::StrCat("sentencepiece encode: ", error));
    if (add_special_tokens) {
      if (add_bos_) ids.insert(ids.begin(), bos_id_);
      if (add_eos_) ids.push_back(eos_id_);
    }
    return ids;
  }

  std::unique_ptr<SentencePieceBackend> sp_;
  std::unique_ptr<SpPlainTextEncoder> plain_;  // null: no special piece is matched in text
  std::vector<bool> special_;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(
    const std::string& model_path, const TokenizerConfig& config) {
  std::ifstream in(model_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(model_path, ": cannot open file"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(model_path, ": read error"));
  const std::string bytes = buffer.str();
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(model_path, ": file is empty"));
  std::string error;
  std::unique_ptr<SentencePieceBackend> sp = SentencePieceBackend::Load(bytes, &error);
  if (sp == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": not a valid SentencePiece model: ", error));
  }
  auto tokenizer = std::make_unique<SentencePieceTokenizer>(std::move(sp), config);
  if (absl::Status s = tokenizer->InitPlainText(bytes); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(model_path, ": ", s.message()));
  }
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace tandem::models
