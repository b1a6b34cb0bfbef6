#include "engine/code_point_set.h"

#include <algorithm>
#include <iterator>

namespace tandem::engine {
namespace {

using B = GrammarBuilder;

constexpr uint32_t kSurrogateFirst = 0xD800;
constexpr uint32_t kSurrogateLast = 0xDFFF;

int Utf8Length(uint32_t code_point) {
  return code_point < 0x80 ? 1 : code_point < 0x800 ? 2 : code_point < 0x10000 ? 3 : 4;
}

void EncodeUtf8(uint32_t c, uint8_t* out) {
  switch (Utf8Length(c)) {
    case 1:
      out[0] = static_cast<uint8_t>(c);
      break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      break;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      break;
  }
}

// The UTF-8 of [first, last] (no surrogates, at least 0x80) as sequences of byte ranges: split
// where the encoding's length changes, then until each piece is a product of one byte range per
// position (the continuation bytes of its ends span their whole 0x80-0xBF range, or the ends
// share every byte but the last).
void Utf8Sequences(uint32_t first, uint32_t last, std::vector<GrammarSequence>* out) {
  for (const uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (first <= boundary && last > boundary) {
      Utf8Sequences(first, boundary, out);
      Utf8Sequences(boundary + 1, last, out);
      return;
    }
  }
  const int length = Utf8Length(first);
  for (int i = 1; i < length; ++i) {
    const uint32_t low_bits = (1u << (6 * i)) - 1;
    if ((first & ~low_bits) == (last & ~low_bits)) continue;
    if ((first & low_bits) != 0) {
      Utf8Sequences(first, first | low_bits, out);
      Utf8Sequences((first | low_bits) + 1, last, out);
      return;
    }
    if ((last & low_bits) != low_bits) {
      Utf8Sequences(first, (last & ~low_bits) - 1, out);
      Utf8Sequences(last & ~low_bits, last, out);
      return;
    }
  }
  uint8_t a[4], z[4];
  EncodeUtf8(first, a);
  EncodeUtf8(last, z);
  GrammarSequence sequence;
  for (int i = 0; i < length; ++i) sequence.push_back(B::Bytes(ByteSet::Range(a[i], z[i])));
  out->push_back(std::move(sequence));
}

// The hex digits of a nibble, both cases.
ByteSet HexDigits(uint32_t nibble) {
  if (nibble < 10) return ByteSet::Of(static_cast<uint8_t>('0' + nibble));
  return ByteSet::Of(static_cast<uint8_t>('a' + nibble - 10))
      .Add(ByteSet::Of(static_cast<uint8_t>('A' + nibble - 10)));
}

}  // namespace

CodePointSet CodePointSet::Range(uint32_t first, uint32_t last) {
  CodePointSet set;
  last = std::min(last, kMaxCodePoint);
  if (first <= last) set.ranges_.emplace_back(first, last);
  set.Normalize();
  return set;
}

CodePointSet& CodePointSet::Add(const CodePointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  Normalize();
  return *this;
}

CodePointSet CodePointSet::Complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& [first, last] : ranges_) {
    if (first > next) out.ranges_.emplace_back(next, first - 1);
    next = last + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.emplace_back(next, kMaxCodePoint);
  out.Normalize();
  return out;
}

bool CodePointSet::Has(uint32_t code_point) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(),
                             std::make_pair(code_point, kMaxCodePoint + 1));
  return it != ranges_.begin() && std::prev(it)->second >= code_point;
}

void CodePointSet::Normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& [first, last] : ranges_) {
    if (!merged.empty() && first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, last);
    } else {
      merged.emplace_back(first, last);
    }
  }
  ranges_.clear();
  for (const auto& [first, last] : merged) {
    if (last < kSurrogateFirst || first > kSurrogateLast) {
      ranges_.emplace_back(first, last);
      continue;
    }
    if (first < kSurrogateFirst) ranges_.emplace_back(first, kSurrogateFirst - 1);
    if (last > kSurrogateLast) ranges_.emplace_back(kSurrogateLast + 1, last);
  }
}

std::vector<GrammarSequence> JsonCharacterSequences(const CodePointSet& set) {
  std::vector<GrammarSequence> out;
  ByteSet plain;
  // Control characters by their high hex digit (0 or 1): the low digits present.
  ByteSet control_low[2];
  const GrammarSymbol backslash = B::Bytes(ByteSet::Of('\\'));
  for (const auto& [first, last] : set.ranges()) {
    for (uint32_t c = first; c <= std::min(last, 0x7Fu); ++c) {
      if (c == '"' || c == '\\') {
        out.push_back({backslash, B::Bytes(ByteSet::Of(static_cast<uint8_t>(c)))});
      } else if (c >= 0x20) {
        plain.Add(ByteSet::Of(static_cast<uint8_t>(c)));
      } else {
        control_low[c >> 4].Add(HexDigits(c & 0xF));
        static constexpr std::pair<uint32_t, char> kShort[] = {
            {0x08, 'b'}, {0x09, 't'}, {0x0A, 'n'}, {0x0C, 'f'}, {0x0D, 'r'}};
        for (const auto& [code, letter] : kShort) {
          if (code == c) out.push_back({backslash, B::Bytes(ByteSet::Of(letter))});
        }
      }
    }
    if (last >= 0x80) Utf8Sequences(std::max(first, 0x80u), last, &out);
  }
  if (!plain.empty()) out.insert(out.begin(), {B::Bytes(plain)});
  for (uint32_t high = 0; high < 2; ++high) {
    if (control_low[high].empty()) continue;
    out.push_back({backslash, B::Bytes(ByteSet::Of('u')), B::Bytes(ByteSet::Of('0')),
                   B::Bytes(ByteSet::Of('0')),
                   B::Bytes(ByteSet::Of(static_cast<uint8_t>('0' + high))),
                   B::Bytes(control_low[high])});
  }
  return out;
}

}  // namespace tandem::engine
