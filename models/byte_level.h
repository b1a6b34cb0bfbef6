// GPT-2's byte-level alphabet, as the `tokenizers` ByteLevel pre-tokenizer and decoder use it:
// every byte stands for one printable character (printable Latin-1 bytes for themselves, the
// others for U+0100 onwards), so that a byte-level BPE vocabulary is a set of ordinary strings
// and any byte sequence, valid UTF-8 or not, can be tokenized.
#ifndef TANDEM_MODELS_BYTE_LEVEL_H_
#define TANDEM_MODELS_BYTE_LEVEL_H_

#include <string>
#include <string_view>

namespace tandem::models {

// Each byte of `bytes` replaced by its character, UTF-8 encoded.
std::string ByteLevelEncode(std::string_view bytes);

// The bytes a token of the byte-level alphabet stands for. False (and `bytes` unchanged) when
// the token holds a character outside the alphabet (an added token such as "<|end_of_text|>"
// can); `tokenizers` then keeps the token's own UTF-8.
bool ByteLevelDecode(std::string_view token, std::string* bytes);

// `bytes` with every ill-formed UTF-8 subsequence replaced by U+FFFD, one per maximal subpart
// (Unicode's recommended practice, as Rust's String::from_utf8_lossy does).
std::string Utf8Lossy(std::string_view bytes);

// The length of the longest prefix of `bytes` whose Utf8Lossy rendering no later byte can
// change: all but a trailing proper prefix of a well-formed sequence. Utf8Lossy of the prefix,
// then of the rest once more bytes have come, concatenate to Utf8Lossy of the whole.
size_t SettledUtf8Prefix(std::string_view bytes);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_BYTE_LEVEL_H_
