#include "server/chat_template/lexer.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::chat_template {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// jinja2 normalises every newline style to "\n" and drops one trailing newline
// (keep_trailing_newline=False) before lexing.
std::string NormalizeSource(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out += in[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
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

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t start = FindTagStart(pos);
      if (start == std::string::npos) {
        Emit(Token::Type::kText, src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, start - pos);
      char kind = src_[start + 1];  // '{', '%' or '#'
      char control = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (control == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (control != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone on its line loses its indentation.
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + l_pos, text.end(), IsSpace)) {
          text.resize(l_pos);
        }
      }
      if (!text.empty()) Emit(Token::Type::kText, text, pos);
      size_t inner = start + 2 + ((control == '-' || control == '+') ? 1 : 0);
      absl::StatusOr<size_t> end;
      if (kind == '#') {
        end = SkipComment(start, inner);
      } else if (kind == '%' && IsRawBegin(inner)) {
        end = LexRaw(start, inner);
      } else {
        Emit(kind == '{' ? Token::Type::kVarBegin : Token::Type::kBlockBegin,
             kind == '{' ? "{{" : "{%", start);
        end = LexTag(kind, inner);
      }
      if (!end.ok()) return end.status();
      pos = *end;
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    Emit(Token::Type::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  std::pair<int, int> LineCol(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = it - line_starts_.begin();
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  void Emit(Token::Type type, std::string text, size_t offset) {
    auto [line, col] = LineCol(offset);
    tokens_.push_back(Token{type, std::move(text), line, col});
  }

  absl::Status Error(size_t offset, const std::string& what) const {
    auto [line, col] = LineCol(offset);
    return absl::InvalidArgumentError(
        absl::StrCat("chat template syntax error at line ", line, ", column ", col, ": ", what));
  }

  // Consumes what follows a closing delimiter: "-" eats all whitespace, trim_blocks eats
  // one newline after a block or comment unless the tag ends with "+".
  size_t AfterTagEnd(size_t close_end, char control, bool is_block_or_comment) const {
    size_t p = close_end;
    if (control == '-') {
      while (p < src_.size() && IsSpace(src_[p])) ++p;
    } else if (control != '+' && is_block_or_comment && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    return p;
  }

  size_t SkipSpaces(size_t p) const {
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    return p;
  }

  // Matches `WORD [-|+]%}` at p (after optional spaces); returns the offset after "%}" and
  // the control character, or npos.
  size_t MatchTagWord(size_t p, const char* word, char& control) const {
    control = '\0';
    p = SkipSpaces(p);
    size_t n = std::char_traits<char>::length(word);
    if (src_.compare(p, n, word) != 0) return std::string::npos;
    p += n;
    if (p < src_.size() && (IsNameStart(src_[p]) || IsDigit(src_[p]))) return std::string::npos;
    p = SkipSpaces(p);
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) control = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return std::string::npos;
    return p + 2;
  }

  bool IsRawBegin(size_t inner) const {
    char control;
    return MatchTagWord(inner, "raw", control) != std::string::npos;
  }

  // {% raw %}...{% endraw %}: the body is text. As in jinja2, no trim_blocks newline is
  // removed after the opening tag, but one is after the closing tag.
  absl::StatusOr<size_t> LexRaw(size_t start, size_t inner) {
    char control;
    size_t body = MatchTagWord(inner, "raw", control);
    if (control == '-') body = SkipSpaces(body);
    for (size_t q = src_.find("{%", body); q != std::string::npos; q = src_.find("{%", q + 2)) {
      size_t p = q + 2;
      char begin_control = '\0';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) begin_control = src_[p++];
      char end_control;
      size_t after = MatchTagWord(p, "endraw", end_control);
      if (after == std::string::npos) continue;
      std::string text = src_.substr(body, q - body);
      if (begin_control == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      if (!text.empty()) Emit(Token::Type::kText, text, body);
      return AfterTagEnd(after, end_control, true);
    }
    return Error(start, "unterminated raw block, expected '{% endraw %}'");
  }

  absl::StatusOr<size_t> SkipComment(size_t start, size_t inner) {
    size_t close = src_.find("#}", inner);
    if (close == std::string::npos) return Error(start, "unterminated comment, expected '#}'");
    char control = close > inner ? src_[close - 1] : '\0';
    if (control != '-' && control != '+') control = '\0';
    return AfterTagEnd(close + 2, control, true);
  }

  absl::StatusOr<size_t> LexTag(char kind, size_t pos) {
    const char close_first = kind == '{' ? '}' : '%';
    int depth = 0;  // brackets open inside the tag: a "}}" there closes a dict, not the tag
    while (true) {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
      if (pos >= src_.size()) {
        return Error(pos, kind == '{' ? "unexpected end of template, expected '}}'"
                                      : "unexpected end of template, expected '%}'");
      }
      char c = src_[pos];
      if (depth == 0) {
        char control = '\0';
        size_t p = pos;
        if ((c == '-' || (c == '+' && kind == '%')) && p + 1 < src_.size()) {
          control = c;
          ++p;
        }
        if (p + 1 < src_.size() && src_[p] == close_first && src_[p + 1] == '}') {
          Emit(kind == '{' ? Token::Type::kVarEnd : Token::Type::kBlockEnd,
               kind == '{' ? "}}" : "%}", pos);
          return AfterTagEnd(p + 2, control, kind == '%');
        }
      }
      if (IsNameStart(c)) {
        size_t b = pos;
        while (pos < src_.size() && (IsNameStart(src_[pos]) || IsDigit(src_[pos]))) ++pos;
        Emit(Token::Type::kName, src_.substr(b, pos - b), b);
      } else if (IsDigit(c)) {
        LexNumber(pos);
      } else if (c == '\'' || c == '"') {
        auto s = LexString(pos);
        if (!s.ok()) return s.status();
      } else {
        static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : kTwo) {
          if (src_.compare(pos, 2, t) == 0) op = t;
        }
        if (op.empty()) {
          if (std::string("+-*/%~[](){}<>=.:|,").find(c) == std::string::npos) {
            return Error(pos, absl::StrCat("unexpected character '", std::string(1, c), "'"));
          }
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        Emit(Token::Type::kOp, op, pos);
        pos += op.size();
      }
    }
  }

  void LexNumber(size_t& pos) {
    size_t b = pos;
    auto digits = [&] {
      while (pos < src_.size() &&
             (IsDigit(src_[pos]) ||
              (src_[pos] == '_' && pos + 1 < src_.size() && IsDigit(src_[pos + 1]))))
        ++pos;
    };
    digits();
    bool is_float = false;
    if (pos + 1 < src_.size() && src_[pos] == '.' && IsDigit(src_[pos + 1])) {
      is_float = true;
      ++pos;
      digits();
    }
    if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
      size_t q = pos + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && IsDigit(src_[q])) {
        is_float = true;
        pos = q;
        digits();
      }
    }
    std::string text;
    for (size_t i = b; i < pos; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Emit(is_float ? Token::Type::kFloat : Token::Type::kInt, text, b);
  }

  // Python string-literal escapes, as jinja2 decodes them ("unicode-escape"); unknown
  // escapes keep their backslash.
  absl::StatusOr<bool> LexString(size_t& pos) {
    size_t b = pos;
    char quote = src_[pos++];
    std::string out;
    while (true) {
      if (pos >= src_.size()) return Error(b, "unterminated string literal");
      char c = src_[pos];
      if (c == quote) {
        ++pos;
        break;
      }
      if (c != '\\') {
        out += c;
        ++pos;
        continue;
      }
      if (pos + 1 >= src_.size()) return Error(b, "unterminated string literal");
      char e = src_[pos + 1];
      pos += 2;
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int i = 0; i < n; ++i) {
            int h = pos + i < src_.size() ? HexValue(src_[pos + i]) : -1;
            if (h < 0) return Error(pos - 2, "truncated \\x/\\u escape in string literal");
            cp = cp * 16 + h;
          }
          if (cp > 0x10FFFF) return Error(pos - 2, "escape beyond U+10FFFF in string literal");
          pos += n;
          AppendUtf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = e - '0';
            for (int i = 0; i < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; ++i)
              cp = cp * 8 + (src_[pos++] - '0');
            AppendUtf8(out, cp);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    Emit(Token::Type::kString, out, b);
    return true;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::string DescribeToken(const Token& t) {
  switch (t.type) {
    case Token::Type::kText:
      return "template text";
    case Token::Type::kVarBegin:
      return "'{{'";
    case Token::Type::kVarEnd:
      return "'}}'";
    case Token::Type::kBlockBegin:
      return "'{%'";
    case Token::Type::kBlockEnd:
      return "'%}'";
    case Token::Type::kString:
      return "string literal";
    case Token::Type::kEof:
      return "end of template";
    default:
      return absl::StrCat("'", t.text, "'");
  }
}

absl::StatusOr<std::vector<Token>> Tokenize(const std::string& source) {
  return Lexer(NormalizeSource(source)).Run();
}

}  // namespace tandem::chat_template
