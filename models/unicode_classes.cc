#include "models/unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace tandem::models {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "models/unicode_classes_table.inc"

template <size_t N>
bool InRanges(const CodePointRange (&ranges)[N], char32_t cp) {
  // The first range that does not end before cp.
  const auto it = std::lower_bound(std::begin(ranges), std::end(ranges), cp,
                                   [](const CodePointRange& r, char32_t c) { return r.last < c; });
  return it != std::end(ranges) && it->first <= cp;
}

}  // namespace

bool IsUnicodeLetter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return InRanges(kLetterRanges, cp);
}

bool IsUnicodeNumber(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return InRanges(kNumberRanges, cp);
}

}  // namespace tandem::models
