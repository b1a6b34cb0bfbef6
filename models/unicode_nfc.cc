#include "models/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "models/unicode_utf8.h"

namespace tandem::models {
namespace {

struct Decomposition {
  char32_t cp;
  uint16_t start;
  uint8_t length;
};
struct CombiningClassRange {
  char32_t first;
  char32_t last;
  uint8_t ccc;
};
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

#include "models/unicode_nfc_table.inc"

// Hangul syllables decompose and compose by arithmetic (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t CombiningClass(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto it =
      std::lower_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                       [](const CombiningClassRange& r, char32_t c) { return r.last < c; });
  return it != std::end(kCombiningClasses) && it->first <= cp ? it->ccc : 0;
}

// A character of the text being normalized, with the input bytes it stands for.
struct Char {
  char32_t cp;
  TextRange from;
};

void Decompose(char32_t cp, TextRange from, std::vector<Char>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back({kLBase + s / kNCount, from});
    out->push_back({kVBase + (s % kNCount) / kTCount, from});
    if (s % kTCount != 0) out->push_back({kTBase + s % kTCount, from});
    return;
  }
  const auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                                   [](const Decomposition& d, char32_t c) { return d.cp < c; });
  if (it == std::end(kDecompositions) || it->cp != cp) {
    out->push_back({cp, from});
    return;
  }
  for (uint8_t i = 0; i < it->length; ++i)
    out->push_back({kDecompositionPool[it->start + i], from});
}

// The primary composite of a pair, or 0.
char32_t Compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto it = std::lower_bound(
      std::begin(kCompositions), std::end(kCompositions), std::pair{first, second},
      [](const Composition& c, std::pair<char32_t, char32_t> key) {
        return c.first < key.first || (c.first == key.first && c.second < key.second);
      });
  return it != std::end(kCompositions) && it->first == first && it->second == second ? it->composite
                                                                                     : 0;
}

TextRange Union(TextRange a, TextRange b) {
  return {std::min(a.begin, b.begin), std::max(a.end, b.end)};
}

}  // namespace

std::string NfcNormalize(std::string_view text, std::vector<TextRange>* align) {
  // ASCII is its own normal form, and most text is ASCII.
  if (std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; })) {
    return std::string(text);
  }
  // 1. Full canonical decomposition.
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = Utf8SequenceLength(text, i);
    if (n == 0) n = 1;  // not reached for valid UTF-8
    const char32_t cp = n == 1 ? static_cast<unsigned char>(text[i]) : DecodeUtf8(text, i, n);
    TextRange from{i, i + n};
    if (align != nullptr) from = Union((*align)[i], (*align)[i + n - 1]);
    Decompose(cp, from, &chars);
    i += n;
  }
  // 2. Canonical order: each run of marks sorted, stably, by combining class.
  for (size_t i = 0; i < chars.size();) {
    if (CombiningClass(chars[i].cp) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < chars.size() && CombiningClass(chars[j].cp) != 0) ++j;
    std::stable_sort(chars.begin() + i, chars.begin() + j, [](const Char& a, const Char& b) {
      return CombiningClass(a.cp) < CombiningClass(b.cp);
    });
    i = j;
  }
  // 3. Canonical composition: each character joins the last starter unless a character between
  //    them blocks it (a starter, or a mark of the same or a higher class).
  std::vector<Char> out;
  out.reserve(chars.size());
  size_t starter = 0;
  bool have_starter = false;
  int last_class = -1;  // class of the last character kept after the starter; -1: none yet
  for (const Char& c : chars) {
    const int cc = CombiningClass(c.cp);
    if (have_starter && (last_class == -1 || last_class < cc)) {
      if (const char32_t composite = Compose(out[starter].cp, c.cp); composite != 0) {
        out[starter] = {composite, Union(out[starter].from, c.from)};
        continue;
      }
    }
    if (cc == 0) {
      starter = out.size();
      have_starter = true;
      last_class = -1;
    } else {
      last_class = cc;
    }
    out.push_back(c);
  }
  std::string result;
  result.reserve(text.size());
  if (align != nullptr) align->clear();
  for (const Char& c : out) {
    const size_t before = result.size();
    AppendUtf8(c.cp, &result);
    if (align != nullptr) align->insert(align->end(), result.size() - before, c.from);
  }
  return result;
}

}  // namespace tandem::models
