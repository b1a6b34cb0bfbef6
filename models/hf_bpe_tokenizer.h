// Tokenizer over a Hugging Face tokenizer.json with a BPE model, as Llama-family SentencePiece
// conversions ship it (Zamba2/Mistral, Jamba) and as byte-level BPE ships it (GPT-2, GPT-NeoX,
// Llama 3, Granite 4): our own implementation of the `tokenizers` pipeline for that subset,
// matching it id for id.
//
// Supported (anything else is a load error naming the file and the component):
//   added_tokens     split out before everything else (leftmost-longest; lstrip, rstrip,
//                    normalized; single_word with an approximate word-character test);
//                    EncodeWithPlainRanges skips special ones that touch a plain range, as
//                    split_special_tokens does, tracing ranges through the normalizer;
//   normalizer       null, Sequence, Prepend, Replace (string pattern), Strip, NFC
//                    (models/unicode_nfc.h);
//   pre_tokenizer    null, Metaspace (prepend_scheme always/first/never or the older
//                    add_prefix_space, split), Split by GPT-2's, Llama 3's or Qwen2's regex
//                    (Isolated, or Removed with invert: models/split_patterns.h), ByteLevel
//                    (add_prefix_space, use_regex), Sequence of those;
//   model            BPE: vocab, merges as "a b" strings or [a, b] lists, byte_fallback,
//                    unk_token + fuse_unk, ignore_merges (no continuing_subword_prefix /
//                    end_of_word_suffix, no dropout);
//   post_processor   null, TemplateProcessing (single), BertProcessing, RobertaProcessing,
//                    ByteLevel (ids unchanged), Sequence of those;
//   decoder          null, Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel.
// When tokenizer_config.json sets add_bos_token / add_eos_token explicitly, those decide what
// add_special_tokens adds (transformers rebuilds the post-processor for Llama-style tokenizers
// the same way); otherwise the post_processor does.
#ifndef TANDEM_MODELS_HF_BPE_TOKENIZER_H_
#define TANDEM_MODELS_HF_BPE_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/tokenizer.h"
#include "models/tokenizer_config.h"

namespace tandem::models {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfBpeTokenizer(const std::string& json_path,
                                                              const TokenizerConfig& config);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_HF_BPE_TOKENIZER_H_
