// The regex pre-tokenizers of byte-level BPE tokenizers, written out by hand: `tokenizers` runs
// them through a regex engine, which tandem does not have, and a tokenizer.json names them by
// their pattern text. We recognise the patterns real checkpoints use and match them with the
// regex engine's semantics (leftmost alternative first, greedy with backtracking); any other
// pattern is refused by the loader, naming it.
#ifndef TANDEM_MODELS_SPLIT_PATTERNS_H_
#define TANDEM_MODELS_SPLIT_PATTERNS_H_

#include <optional>
#include <string_view>
#include <vector>

namespace tandem::models {

enum class SplitPattern {
  // GPT-2's, also what a ByteLevel pre-tokenizer with use_regex applies (GPT-NeoX):
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // Llama 3's, GPT-4's cl100k, Granite 4's; numbers in runs of up to 3:
  //   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  //   \s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // The same with single digits (\p{N} for \p{N}{1,3}), as Qwen2's.
  kLlama3SingleDigits,
};

// Which pattern `regex` (a tokenizer.json Split's "Regex" text) is, if we know it.
std::optional<SplitPattern> RecognizeSplitPattern(std::string_view regex);

// Appends the pieces `text` (valid UTF-8) splits into: the pattern's successive matches. Every
// character is matched by one alternative or another, so the pieces, concatenated, are `text`.
void SplitWithPattern(SplitPattern pattern, std::string_view text,
                      std::vector<std::string_view>* pieces);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SPLIT_PATTERNS_H_
