// String helpers with Python's semantics: strings are sequences of code points, so length,
// indexing, slicing and reversing decode UTF-8 first. Case mapping is ASCII-only.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_TEXT_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_TEXT_H_

#include <optional>
#include <string>
#include <vector>

#include "server/chat_template/provenance.h"

namespace tandem::chat_template {

// Invalid bytes decode to lone surrogates U+DC80..U+DCFF and encode back unchanged
// (Python's surrogateescape), so no input is lost.
// `offsets`, when given, receives the byte offset of each code point and then s.size().
std::u32string DecodeUtf8(const std::string& s, std::vector<size_t>* offsets = nullptr);
std::string EncodeUtf8(const std::u32string& s);
size_t CodePointCount(const std::string& s);

bool IsPySpace(char32_t c);
std::string AsciiUpper(std::string s);
std::string AsciiLower(std::string s);
std::string PyStrip(const std::string& s, const std::string* chars, bool left, bool right);
// str.strip on text with provenance: the kept bytes keep theirs.
Text StripText(const Text& s, const std::string* chars, bool left, bool right);
// str.replace. Copied bytes keep their provenance; an inserted `to` keeps its own, and is
// wholly untrusted where the text it replaced was partly untrusted. nullopt when the result
// would exceed max_bytes (checked before building it).
std::optional<Text> ReplaceText(const Text& s, const std::string& from, const Text& to,
                                long long count, size_t max_bytes);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_TEXT_H_
