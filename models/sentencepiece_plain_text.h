// Plain-text encoding for SentencePiece models (Tokenizer::EncodeWithPlainRanges).
// libsentencepiece matches user-defined pieces ("<|im_start|>") anywhere in the text and has no
// switch to stop it, so a second processor is loaded from a copy of the model in which every
// special user-defined piece is renamed to a sentinel that valid UTF-8 can never contain (a
// 0xFF byte, then three bytes, one "character" to sentencepiece). In that model the old
// spellings are ordinary text. To encode text whose special pieces are to be kept outside
// some ranges, those occurrences are replaced by their sentinels, which that model maps to the
// same ids, and everything else is encoded exactly as by the original model.
#ifndef TANDEM_MODELS_SENTENCEPIECE_PLAIN_TEXT_H_
#define TANDEM_MODELS_SENTENCEPIECE_PLAIN_TEXT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/sentencepiece_backend.h"
#include "models/tokenizer.h"

namespace tandem::models {

class SpPlainTextEncoder {
 public:
  // `special[id]` marks the special ids. Null when no user-defined piece is special: then
  // the model matches no special token inside text and plain encoding is ordinary encoding.
  static absl::StatusOr<std::unique_ptr<SpPlainTextEncoder>> Create(
      std::string_view serialized_model, const std::vector<bool>& special);

  // The input for backend(): `text` with each special user-defined piece that lies wholly
  // outside `plain` replaced by its sentinel. nullopt when no special piece's spelling touches
  // a plain range, so the original model's encoding of `text` is already the answer.
  std::optional<std::string> Rewrite(std::string_view text,
                                     absl::Span<const TextRange> plain) const;
  const SentencePieceBackend& backend() const { return *backend_; }

 private:
  struct Piece {
    std::string spelling;
    std::string sentinel;  // empty for user-defined pieces that are not special
  };
  std::unique_ptr<SentencePieceBackend> backend_;
  std::vector<Piece> user_defined_;  // longest first
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SENTENCEPIECE_PLAIN_TEXT_H_
