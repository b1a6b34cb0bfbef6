// String helpers with Python's semantics: strings are sequences of code points, so length,
// indexing, slicing and reversing decode UTF-8 first. Case mapping is ASCII-only.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_TEXT_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_TEXT_H_

#include <optional>
#include <string>

namespace tandem::chat_template {

// Invalid bytes decode to lone surrogates U+DC80..U+DCFF and encode back unchanged
// (Python's surrogateescape), so no input is lost.
std::u32string DecodeUtf8(const std::string& s);
std::string EncodeUtf8(const std::u32string& s);
size_t CodePointCount(const std::string& s);

bool IsPySpace(char32_t c);
std::string AsciiUpper(std::string s);
std::string AsciiLower(std::string s);
std::string PyStrip(const std::string& s, const std::string* chars, bool left, bool right);
// nullopt when the result would exceed max_bytes (checked before building it).
std::optional<std::string> ReplaceAll(const std::string& s, const std::string& from,
                                      const std::string& to, long long count, size_t max_bytes);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_TEXT_H_
