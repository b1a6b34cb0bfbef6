// Small UTF-8 helpers shared by the tokenizers (and the incremental detokenizer).
#ifndef TANDEM_MODELS_UNICODE_UTF8_H_
#define TANDEM_MODELS_UNICODE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace tandem::models {

// Length of the well-formed UTF-8 sequence starting at s[pos] (1..4), or 0 when the bytes there
// are not one (bad lead byte, bad continuation, overlong form, surrogate, > U+10FFFF, truncated).
size_t Utf8SequenceLength(std::string_view s, size_t pos);

bool IsValidUtf8(std::string_view s);

// Length of the longest prefix of `s` that is valid UTF-8 except that an incomplete sequence at
// the very end is left out — what a streaming decoder may emit now.
size_t CompleteUtf8PrefixLength(std::string_view s);

// Decodes the code point of a well-formed sequence of length `len` at s[pos].
char32_t DecodeUtf8(std::string_view s, size_t pos, size_t len);

void AppendUtf8(char32_t cp, std::string* out);

// Unicode White_Space (what Rust's char::is_whitespace and the `tokenizers` lstrip/rstrip use).
bool IsUnicodeWhitespace(char32_t cp);

// Parses a byte-fallback piece "<0xNN>" (hex, either case; a '+' in place of the first digit is
// accepted as Rust's u8::from_str_radix does, to decode exactly as `tokenizers`).
bool ParseByteFallbackPiece(std::string_view piece, unsigned char* byte);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_UNICODE_UTF8_H_
