// Reads and edits the piece list of a serialized SentencePiece ModelProto (a tokenizer.model
// file) at the protobuf wire level: Debian ships no sentencepiece_model.pb.h, and the only
// edit we need (renaming a few pieces) touches one field. Everything else is copied byte for
// byte. Malformed input gives nullopt, never a crash.
#ifndef TANDEM_MODELS_SENTENCEPIECE_MODEL_PROTO_H_
#define TANDEM_MODELS_SENTENCEPIECE_MODEL_PROTO_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::models {

// ModelProto.SentencePiece.Type.
enum class SpPieceType : int {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct SpPiece {
  std::string piece;
  SpPieceType type = SpPieceType::kNormal;
};

// The pieces in id order.
std::optional<std::vector<SpPiece>> ReadSpPieces(std::string_view model);

// A copy of `model` in which piece `id` is spelled `renames[id]`.
std::optional<std::string> RenameSpPieces(std::string_view model,
                                          const std::map<int32_t, std::string>& renames);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SENTENCEPIECE_MODEL_PROTO_H_
