#include "models/split_patterns.h"

#include <algorithm>
#include <cstdint>

#include "models/unicode_classes.h"
#include "models/unicode_utf8.h"

namespace tandem::models {
namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3SingleDigitsRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text as code points, with each one's byte offset (and the end offset after the last).
class CodePoints {
 public:
  explicit CodePoints(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
      size_t n = Utf8SequenceLength(text, i);
      if (n == 0) n = 1;  // not reached for valid UTF-8; keeps the scan moving regardless
      cps_.push_back(n == 1 ? static_cast<unsigned char>(text[i]) : DecodeUtf8(text, i, n));
      offsets_.push_back(i);
      i += n;
    }
    offsets_.push_back(text.size());
  }
  size_t size() const { return cps_.size(); }
  char32_t operator[](size_t i) const { return i < cps_.size() ? cps_[i] : 0; }
  size_t offset(size_t i) const { return offsets_[i]; }

 private:
  std::vector<char32_t> cps_;
  std::vector<size_t> offsets_;
};

bool IsSpace(char32_t c) { return IsUnicodeWhitespace(c); }
bool IsOther(char32_t c) { return !IsSpace(c) && !IsUnicodeLetter(c) && !IsUnicodeNumber(c); }
bool IsNewline(char32_t c) { return c == '\r' || c == '\n'; }

// Matches of the pattern's alternatives at position i, each returning the end (exclusive) of
// its match or i when it does not match there.
class Matcher {
 public:
  explicit Matcher(const CodePoints& t) : t_(t), n_(t.size()) {}

  template <typename Pred>
  size_t Run(size_t i, Pred pred) const {  // the longest run of pred from i
    while (i < n_ && pred(t_[i])) ++i;
    return i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, case-sensitive or (?i:...). Under Unicode case folding the only
  // character beyond ASCII that folds to one of these letters is U+017F (long s), to 's'.
  size_t Contraction(size_t i, bool ignore_case) const {
    if (t_[i] != '\'' || i + 1 >= n_) return i;
    const auto is = [&](size_t at, char lower) {
      if (at >= n_) return false;
      const char32_t c = t_[at];
      if (c == static_cast<char32_t>(lower)) return true;
      if (!ignore_case) return false;
      return c == static_cast<char32_t>(lower - 'a' + 'A') || (lower == 's' && c == 0x17F);
    };
    if (is(i + 1, 's') || is(i + 1, 't')) return i + 2;
    if ((is(i + 1, 'r') || is(i + 1, 'v')) && is(i + 2, 'e')) return i + 3;
    if (is(i + 1, 'm')) return i + 2;
    if (is(i + 1, 'l') && is(i + 2, 'l')) return i + 3;
    if (is(i + 1, 'd')) return i + 2;
    return i;
  }

  // ` ?X+`: an optional ASCII space, then one or more characters of class X.
  template <typename Pred>
  size_t SpaceThenRun(size_t i, Pred pred) const {
    size_t j = i;
    if (t_[j] == ' ' && j + 1 < n_ && pred(t_[j + 1])) ++j;
    if (j >= n_ || !pred(t_[j])) return i;
    return Run(j, pred);
  }

  // \s+(?!\S): the whitespace run, less its last character when a non-space follows (that one
  // is left to prefix the next word); nothing when that leaves it empty.
  size_t SpacesNotBeforeWord(size_t i) const {
    if (i >= n_ || !IsSpace(t_[i])) return i;
    const size_t end = Run(i, IsSpace);
    if (end == n_) return end;
    return end - 1 > i ? end - 1 : i;
  }

  // \s+
  size_t Spaces(size_t i) const { return Run(i, IsSpace); }

  // \s*[\r\n]+: through the last CR or LF of the whitespace run.
  size_t SpacesThroughNewline(size_t i) const {
    const size_t end = Run(i, IsSpace);
    for (size_t p = end; p > i; --p) {
      if (IsNewline(t_[p - 1])) return p;
    }
    return i;
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+
  size_t PrefixedLetters(size_t i) const {
    size_t j = i;
    const char32_t c = t_[i];
    if (!IsUnicodeLetter(c) && !IsNewline(c) && !IsUnicodeNumber(c) && j + 1 < n_ &&
        IsUnicodeLetter(t_[j + 1])) {
      ++j;
    }
    if (j >= n_ || !IsUnicodeLetter(t_[j])) return i;
    return Run(j, IsUnicodeLetter);
  }

  // \p{N}{1,max}
  size_t Numbers(size_t i, size_t max) const {
    size_t j = i;
    while (j < n_ && j - i < max && IsUnicodeNumber(t_[j])) ++j;
    return j;
  }

  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t SymbolsThenNewlines(size_t i) const {
    const size_t j = SpaceThenRun(i, IsOther);
    return j == i ? i : Run(j, IsNewline);
  }

 private:
  const CodePoints& t_;
  const size_t n_;
};

// Each tries the alternatives in order and stops at the first that matches, as the regex's
// alternation does.
size_t MatchGpt2(const Matcher& m, size_t i) {
  if (size_t end = m.Contraction(i, false); end > i) return end;
  if (size_t end = m.SpaceThenRun(i, IsUnicodeLetter); end > i) return end;
  if (size_t end = m.SpaceThenRun(i, IsUnicodeNumber); end > i) return end;
  if (size_t end = m.SpaceThenRun(i, IsOther); end > i) return end;
  if (size_t end = m.SpacesNotBeforeWord(i); end > i) return end;
  if (size_t end = m.Spaces(i); end > i) return end;
  return i + 1;  // unreachable: every character is a letter, number, space or other
}

size_t MatchLlama3(const Matcher& m, size_t i, size_t max_digits) {
  if (size_t end = m.Contraction(i, true); end > i) return end;
  if (size_t end = m.PrefixedLetters(i); end > i) return end;
  if (size_t end = m.Numbers(i, max_digits); end > i) return end;
  if (size_t end = m.SymbolsThenNewlines(i); end > i) return end;
  if (size_t end = m.SpacesThroughNewline(i); end > i) return end;
  if (size_t end = m.SpacesNotBeforeWord(i); end > i) return end;
  if (size_t end = m.Spaces(i); end > i) return end;
  return i + 1;  // unreachable, as above
}

}  // namespace

std::optional<SplitPattern> RecognizeSplitPattern(std::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::kGpt2;
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  if (regex == kLlama3SingleDigitsRegex) return SplitPattern::kLlama3SingleDigits;
  return std::nullopt;
}

void SplitWithPattern(SplitPattern pattern, std::string_view text,
                      std::vector<std::string_view>* pieces) {
  const CodePoints t(text);
  const Matcher m(t);
  for (size_t i = 0; i < t.size();) {
    size_t end;
    switch (pattern) {
      case SplitPattern::kGpt2:
        end = MatchGpt2(m, i);
        break;
      case SplitPattern::kLlama3:
        end = MatchLlama3(m, i, 3);
        break;
      case SplitPattern::kLlama3SingleDigits:
      default:
        end = MatchLlama3(m, i, 1);
        break;
    }
    pieces->push_back(text.substr(t.offset(i), t.offset(end) - t.offset(i)));
    i = end;
  }
}

}  // namespace tandem::models
