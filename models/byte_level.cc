#include "models/byte_level.h"

#include <array>
#include <cstdint>

#include "models/unicode_utf8.h"

namespace tandem::models {
namespace {

// Bytes that are printable in Latin-1 keep their value as a code point; the other 68 take
// U+0100, U+0101, ... in byte order.
bool KeepsItsValue(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  static constexpr char32_t kEnd = 0x100 + 68;  // the alphabet is U+0021..U+0143
  std::array<std::string, 256> utf8_of_byte;
  std::array<int16_t, kEnd> byte_of_char;
  Alphabet() {
    byte_of_char.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = KeepsItsValue(b) ? static_cast<char32_t>(b) : next++;
      AppendUtf8(c, &utf8_of_byte[b]);
      byte_of_char[c] = static_cast<int16_t>(b);
    }
  }
  // The byte a character stands for, or -1.
  int ByteOf(char32_t c) const { return c < kEnd ? byte_of_char[c] : -1; }
};

const Alphabet& TheAlphabet() {
  static const Alphabet alphabet;
  return alphabet;
}

// How many bytes from s[pos] form the start of a well-formed sequence (a maximal subpart), at
// least 1: the unit one U+FFFD replaces.
size_t MaximalSubpart(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t n = 1;
  while (n < need && pos + n < s.size()) {
    const unsigned char b = byte(pos + n);
    const bool ok = n == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

std::string ByteLevelEncode(std::string_view bytes) {
  const Alphabet& a = TheAlphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += a.utf8_of_byte[static_cast<unsigned char>(c)];
  return out;
}

bool ByteLevelDecode(std::string_view token, std::string* bytes) {
  const Alphabet& a = TheAlphabet();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const size_t n = Utf8SequenceLength(token, i);
    if (n == 0) return false;
    const int b = a.ByteOf(DecodeUtf8(token, i, n));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    i += n;
  }
  *bytes += out;
  return true;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = Utf8SequenceLength(bytes, i);
    if (n > 0) {
      out.append(bytes, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += MaximalSubpart(bytes, i);
    }
  }
  return out;
}

size_t SettledUtf8Prefix(std::string_view bytes) {
  size_t settled = 0;
  for (size_t i = 0; i < bytes.size();) {
    size_t n = Utf8SequenceLength(bytes, i);
    if (n == 0) {
      n = MaximalSubpart(bytes, i);
      // A subpart that reaches the end may yet complete: wait for the next byte.
      if (i + n == bytes.size() && static_cast<unsigned char>(bytes[i]) >= 0xC2 &&
          static_cast<unsigned char>(bytes[i]) <= 0xF4) {
        return settled;
      }
    }
    i += n;
    settled = i;
  }
  return settled;
}

}  // namespace tandem::models
