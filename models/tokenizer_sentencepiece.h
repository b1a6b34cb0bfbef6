// Tokenizer over a SentencePiece tokenizer.model (Jamba ships one), through libsentencepiece.
#ifndef TANDEM_MODELS_TOKENIZER_SENTENCEPIECE_H_
#define TANDEM_MODELS_TOKENIZER_SENTENCEPIECE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/tokenizer.h"
#include "models/tokenizer_config.h"

namespace tandem::models {

// Encode is sentencepiece's plain encode (user-defined pieces such as "<|im_start|>" are matched
// inside text; control pieces such as "<|endoftext|>" are not). add_special_tokens prepends BOS
// unless add_bos_token is false and appends EOS when add_eos_token. Special ids: control and
// unknown pieces, plus the config's bos/eos/pad/unk tokens and its special added_tokens_decoder
// entries. Decode is sentencepiece's decode (which renders control pieces as nothing).
// EncodeWithPlainRanges reads special user-defined pieces inside the ranges as text through a
// second processor loaded from a renamed copy of the model (sentencepiece_plain_text.h).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(
    const std::string& model_path, const TokenizerConfig& config);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_TOKENIZER_SENTENCEPIECE_H_
