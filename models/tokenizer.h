// The tokenizer interface the engine uses, and LoadTokenizer(), which picks the implementation
// from the files in a checkpoint directory:
//   tokenizer.json  -> HfBpeTokenizer (hf_bpe_tokenizer.h), our own Hugging Face BPE;
//   tokenizer.model -> SentencePieceTokenizer (tokenizer_sentencepiece.h), libsentencepiece.
// Both reproduce their Python reference (`tokenizers`, `sentencepiece`) id for id; the fixtures
// in tests/data/tokenizers are the contract. Implementations are immutable after loading, so
// every method may be called from any thread.
#ifndef TANDEM_MODELS_TOKENIZER_H_
#define TANDEM_MODELS_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/tokenizer_config.h"

namespace tandem::models {

// Bytes [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

// Whether bytes [begin, end) share a byte with one of `ranges` (sorted, disjoint).
bool Touches(absl::Span<const TextRange> ranges, size_t begin, size_t end);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text (UTF-8) to ids. add_special_tokens adds what the checkpoint adds to plain text (BOS
  // when add_bos_token, EOS when add_eos_token). Special tokens written inside `text` become
  // their ids (tokenizer.json added tokens; SentencePiece user-defined pieces). Invalid UTF-8
  // is INVALID_ARGUMENT.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                                      bool add_special_tokens) const = 0;

  // As Encode, except that inside the `plain` ranges (sorted, disjoint, within `text`) the
  // spelling of a special token is ordinary text: it is tokenized as the characters it is made
  // of and its id never results from it (`tokenizers`' split_special_tokens for added tokens
  // marked special; special user-defined pieces for SentencePiece). Special tokens wholly
  // outside the ranges are recognised as Encode recognises them, and text without special-token
  // spellings in the ranges gives exactly Encode's ids: the ranges change which special tokens
  // are matched, never how the text between them is split. This is how a chat prompt keeps the
  // template's markers while the client's text cannot forge them. Ranges that are not sorted,
  // overlap or exceed the text are INVALID_ARGUMENT.
  absl::StatusOr<std::vector<int32_t>> EncodeWithPlainRanges(std::string_view text,
                                                             absl::Span<const TextRange> plain,
                                                             bool add_special_tokens) const;

  // The whole of `text` plain.
  absl::StatusOr<std::vector<int32_t>> EncodePlain(std::string_view text,
                                                   bool add_special_tokens) const {
    const TextRange all{0, text.size()};
    return EncodeWithPlainRanges(text, absl::MakeConstSpan(&all, text.empty() ? 0 : 1),
                                 add_special_tokens);
  }

  // Ids to text, as the reference decode does: byte-fallback pieces are assembled into UTF-8
  // (invalid sequences become U+FFFD), the dummy-prefix space of the first piece is dropped.
  // Ids outside [0, vocab_size()) are ignored. skip_special_tokens drops IsSpecial() ids.
  virtual std::string Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const = 0;

  // The vocabulary entry of an id, e.g. "▁the", "<0x0A>", "<|im_end|>"; "" when out of range.
  virtual std::string TokenToPiece(int32_t id) const = 0;

  // What the id contributes to decoded text before assembling: "▁" becomes a space, a
  // byte-fallback piece "<0xNN>" becomes that single (possibly partial-UTF-8) byte, a control
  // token (SentencePiece BOS/EOS/pad) is empty. An incremental detokenizer concatenates these,
  // emits the longest valid UTF-8 prefix, and drops one leading space of the whole output when
  // strips_leading_space().
  virtual std::string TokenBytes(int32_t id) const = 0;
  virtual bool strips_leading_space() const = 0;
  // Whether Decode(ids) is exactly the concatenated TokenBytes of the ids it keeps, with
  // ill-formed UTF-8 replaced by maximal subparts (models/byte_level.h, Utf8Lossy): true for a
  // byte-level BPE, whose tokens split characters anywhere. A streaming decoder can then treat
  // the output as one byte stream.
  virtual bool decodes_as_byte_stream() const { return false; }

  // Id of a vocabulary entry or added token, -1 when absent.
  virtual int32_t PieceToId(std::string_view piece) const = 0;

  // One past the largest id (added tokens included).
  virtual int32_t vocab_size() const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;

  // -1 when the checkpoint has none.
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  // tokenizer_config.json as read (defaults when the file is absent).
  const TokenizerConfig& config() const { return config_; }

 protected:
  // EncodeWithPlainRanges with `plain` checked. A tokenizer that does not override it can
  // only encode without plain ranges (FAILED_PRECONDITION otherwise).
  virtual absl::StatusOr<std::vector<int32_t>> EncodeRanges(std::string_view text,
                                                            absl::Span<const TextRange> plain,
                                                            bool add_special_tokens) const;

  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t pad_id_ = -1;
  int32_t unk_id_ = -1;
  TokenizerConfig config_;
};

// transformers' clean_up_tokenization (" ." -> ".", " n't" -> "n't", ...), which its decode applies
// on top of the tokenizer's when tokenizer_config.json sets clean_up_tokenization_spaces. Decode
// does not apply it (it matches `tokenizers`); callers that want transformers' text do.
std::string CleanUpTokenizationSpaces(std::string_view text);

// The ids of those of `pieces` that are special tokens of `tokenizer` (markup such as a tool
// call's or a reasoning block's markers, which skip_special_tokens would drop from the text); a
// piece that is not a single special token, or is empty, is left out.
std::vector<int32_t> SpecialTokenIds(const Tokenizer& tokenizer,
                                     absl::Span<const std::string_view> pieces);

// Loads the tokenizer of a checkpoint directory: tokenizer.json when present, else
// tokenizer.model, with tokenizer_config.json when present. Errors name the offending file.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_dir);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_TOKENIZER_H_
