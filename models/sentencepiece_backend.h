// A thin, Abseil-free facade over libsentencepiece. sentencepiece_processor.h declares its own
// absl::string_view, which clashes with real Abseil headers, so that header is included by
// sentencepiece_backend.cc only and this interface uses plain C++ types and std::string errors.
// SentencePieceTokenizer (tokenizer_sentencepiece.h) wraps it in absl::Status.
#ifndef TANDEM_MODELS_SENTENCEPIECE_BACKEND_H_
#define TANDEM_MODELS_SENTENCEPIECE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::models {

class SentencePieceBackend {
 public:
  // Loads a serialized ModelProto (a tokenizer.model file's bytes). On failure returns null and
  // sets *error to sentencepiece's message.
  static std::unique_ptr<SentencePieceBackend> Load(std::string_view serialized_model,
                                                    std::string* error);
  ~SentencePieceBackend();
  SentencePieceBackend(const SentencePieceBackend&) = delete;
  SentencePieceBackend& operator=(const SentencePieceBackend&) = delete;

  // Plain encoding (no BOS/EOS). Returns false and sets *error on failure.
  bool Encode(std::string_view text, std::vector<int32_t>* ids, std::string* error) const;
  // Every id must be in [0, piece_size()).
  bool Decode(const std::vector<int32_t>& ids, std::string* text, std::string* error) const;

  int32_t piece_size() const;
  std::string IdToPiece(int32_t id) const;
  int32_t PieceToId(std::string_view piece) const;  // unk_id() when absent
  bool IsControl(int32_t id) const;
  bool IsUnknown(int32_t id) const;
  bool IsUnused(int32_t id) const;
  bool IsByte(int32_t id) const;
  // -1 when the model has none.
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;
  int32_t unk_id() const;
  // Whether decoding drops the leading space of the first piece (the dummy prefix).
  bool strips_leading_space() const;

 private:
  struct Impl;
  explicit SentencePieceBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SENTENCEPIECE_BACKEND_H_
