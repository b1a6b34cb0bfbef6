#include "server/chat_template/text.h"

#include <algorithm>

namespace tandem::chat_template {

std::u32string DecodeUtf8(const std::string& s, std::vector<size_t>* offsets) {
  std::u32string out;
  out.reserve(s.size());
  if (offsets) offsets->clear();
  size_t i = 0;
  while (i < s.size()) {
    if (offsets) offsets->push_back(i);
    unsigned char c = s[i];
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    char32_t cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    bool ok = n >= 0 && i + n < s.size();
    for (int k = 1; ok && k <= n; ++k) {
      unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80) {
        ok = false;
      } else {
        cp = (cp << 6) | (cc & 0x3F);
      }
    }
    if (ok && n > 0) {
      static const char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
      if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    }
    if (!ok) {
      out += static_cast<char32_t>(0xDC00 + c);
      ++i;
    } else {
      out += cp;
      i += n + 1;
    }
  }
  if (offsets) offsets->push_back(s.size());
  return out;
}

std::string EncodeUtf8(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp >= 0xDC80 && cp <= 0xDCFF) {
      out += static_cast<char>(cp - 0xDC00);
    } else if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

size_t CodePointCount(const std::string& s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return DecodeUtf8(s).size();
  }
  return s.size();
}

bool IsPySpace(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string AsciiUpper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  }
  return s;
}

std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}

namespace {

// The kept byte range of str.strip.
std::pair<size_t, size_t> StripRange(const std::string& s, const std::string* chars, bool left,
                                     bool right) {
  std::vector<size_t> offsets;
  std::u32string u = DecodeUtf8(s, &offsets);
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : IsPySpace(c);
  };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip(u[e - 1])) --e;
  }
  return {offsets[b], offsets[e]};
}

}  // namespace

std::string PyStrip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto [b, e] = StripRange(s, chars, left, right);
  return s.substr(b, e - b);
}

Text StripText(const Text& s, const std::string* chars, bool left, bool right) {
  auto [b, e] = StripRange(s.text, chars, left, right);
  Text out;
  out.AppendSlice(s, b, e);
  return out;
}

std::optional<Text> ReplaceText(const Text& s, const std::string& from, const Text& to,
                                long long count, size_t max_bytes) {
  size_t occurrences = 0;
  if (from.empty()) {
    occurrences = CodePointCount(s.text) + 1;
  } else {
    for (size_t f = s.text.find(from); f != std::string::npos;
         f = s.text.find(from, f + from.size())) {
      ++occurrences;
    }
  }
  if (count >= 0 && static_cast<size_t>(count) < occurrences) occurrences = count;
  if (to.text.size() > from.size() &&
      (to.text.size() - from.size()) >
          (max_bytes - std::min(max_bytes, s.text.size())) / std::max<size_t>(occurrences, 1)) {
    return std::nullopt;
  }
  Text out;
  auto insert = [&](size_t at, size_t replaced) {
    if (s.taint.Overlaps(at, at + std::max<size_t>(replaced, 1))) {
      out.Append(to.text, true);
    } else {
      out.Append(to);
    }
  };
  long long done = 0;
  if (from.empty()) {
    // Python inserts `to` around every code point.
    std::vector<size_t> offsets;
    DecodeUtf8(s.text, &offsets);
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        // Between two code points: untrusted when either neighbour is.
        bool untrusted = (i > 0 && s.taint.Overlaps(offsets[i - 1], offsets[i])) ||
                         (i + 1 < offsets.size() && s.taint.Overlaps(offsets[i], offsets[i + 1]));
        if (untrusted) {
          out.Append(to.text, true);
        } else {
          out.Append(to);
        }
        ++done;
      }
      if (i + 1 < offsets.size()) out.AppendSlice(s, offsets[i], offsets[i + 1]);
    }
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    size_t f = s.text.find(from, pos);
    if (f == std::string::npos) break;
    out.AppendSlice(s, pos, f);
    insert(f, from.size());
    pos = f + from.size();
    ++done;
  }
  out.AppendSlice(s, pos, s.text.size());
  return out;
}

}  // namespace tandem::chat_template
