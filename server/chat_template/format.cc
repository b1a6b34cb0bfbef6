#include "server/chat_template/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/markup.h"
#include "server/chat_template/status_macros.h"
#include "server/chat_template/text.h"

namespace tandem::chat_template {
namespace {

// ---- format(value, spec): the mini-language [[fill]align][sign][#][0][width][,|_][.prec][type]

struct Spec {
  std::string fill = " ";
  char align = 0;
  char sign = 0;
  bool alt = false;
  bool zero = false;
  int64_t width = -1;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

bool IsAlign(char32_t c) { return c == '<' || c == '>' || c == '=' || c == '^'; }

absl::StatusOr<Spec> ParseSpec(Interpreter& in, const std::string& text) {
  std::u32string u = DecodeUtf8(text);
  Spec s;
  size_t i = 0;
  if (u.size() >= 2 && IsAlign(u[1])) {
    s.fill = EncodeUtf8(u.substr(0, 1));
    s.align = static_cast<char>(u[1]);
    i = 2;
  } else if (!u.empty() && IsAlign(u[0])) {
    s.align = static_cast<char>(u[0]);
    i = 1;
  }
  if (i < u.size() && (u[i] == '+' || u[i] == '-' || u[i] == ' '))
    s.sign = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '#') {
    s.alt = true;
    ++i;
  }
  if (i < u.size() && u[i] == '0') {
    s.zero = true;
    ++i;
  }
  auto digits = [&](int64_t* out) {
    size_t start = i;
    int64_t v = 0;
    while (i < u.size() && u[i] >= '0' && u[i] <= '9') {
      v = std::min<int64_t>(v * 10 + (u[i] - '0'), 1 << 20);
      ++i;
    }
    if (i > start) *out = v;
    return i > start;
  };
  digits(&s.width);
  if (i < u.size() && (u[i] == ',' || u[i] == '_')) s.grouping = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '.') {
    ++i;
    if (!digits(&s.precision)) return in.Error("ValueError: Format specifier missing precision");
  }
  if (i < u.size()) s.type = static_cast<char>(u[i] < 0x80 ? u[i] : '?'), ++i;
  if (i < u.size()) return in.Error("ValueError: Invalid format specifier");
  if (s.width > static_cast<int64_t>(in.limits().max_output_bytes)) {
    return in.Error("format width too large");
  }
  return s;
}

// Pads `body` (whose sign and prefix, for '=' alignment, are the first `head` bytes).
Text Pad(const Text& body, size_t head, const Spec& s, char default_align) {
  char align = s.align ? s.align : default_align;
  std::string fill = s.fill;
  if (s.zero && !s.align) {
    fill = "0";
    if (default_align == '>') align = '=';
  }
  const int64_t len = static_cast<int64_t>(CodePointCount(body.text));
  const int64_t pad = std::max<int64_t>(0, s.width - len);
  if (pad == 0) return body;
  auto fills = [&](int64_t n) {
    std::string f;
    for (int64_t k = 0; k < n; ++k) f += fill;
    return f;
  };
  Text out;
  switch (align) {
    case '<':
      out.Append(body);
      out.Append(fills(pad));
      break;
    case '^':
      out.Append(fills(pad / 2));
      out.Append(body);
      out.Append(fills(pad - pad / 2));
      break;
    case '=':
      out.AppendSlice(body, 0, head);
      out.Append(fills(pad));
      out.AppendSlice(body, head, body.text.size());
      break;
    default:
      out.Append(fills(pad));
      out.Append(body);
  }
  return out;
}

std::string Group(const std::string& digits, char sep, size_t every) {
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % every == 0) out += sep;
    out += digits[i];
  }
  return out;
}

// The first `precision` code points of `text` (all of it when precision < 0).
Text Truncated(Text text, int64_t precision) {
  if (precision < 0) return text;
  std::vector<size_t> offsets;
  DecodeUtf8(text.text, &offsets);
  if (static_cast<size_t>(precision) + 1 >= offsets.size()) return text;
  Text cut;
  cut.AppendSlice(text, 0, offsets[precision]);
  return cut;
}

std::string UnknownCode(char type, const Value& v) {
  return absl::StrCat("ValueError: Unknown format code '", std::string(1, type),
                      "' for object of type '", v.TypeName(), "'");
}

absl::StatusOr<Text> FormatString(Interpreter& in, const Value& v, const Spec& s) {
  if (s.type != 0 && s.type != 's') return in.Error(UnknownCode(s.type, v));
  if (s.sign) return in.Error("ValueError: Sign not allowed in string format specifier");
  if (s.alt)
    return in.Error("ValueError: Alternate form (#) not allowed in string format specifier");
  if (s.align == '=') {
    return in.Error("ValueError: '=' alignment not allowed in string format specifier");
  }
  if (s.grouping)
    return in.Error(
        absl::StrCat("ValueError: Cannot specify '", std::string(1, s.grouping), "' with 's'."));
  return Pad(Truncated(v.StrText(), s.precision), 0, s, '<');
}

std::string FloatDigits(double x, char type, int64_t precision, bool alt) {
  if (std::isinf(x) || std::isnan(x)) {
    std::string r = std::isnan(x) ? "nan" : "inf";
    if (type == 'E' || type == 'F' || type == 'G') r = AsciiUpper(r);
    return r;
  }
  if (type == 0 && precision < 0) return FormatFloat(x);
  char buf[512];
  char conv = type == 0 || type == 'n' ? 'g' : type == '%' ? 'f' : type;
  int p = static_cast<int>(precision < 0 ? 6 : std::min<int64_t>(precision, 300));
  if (type == 0 && p == 0) p = 1;
  std::string f = std::string("%") + (alt ? "#" : "") + ".*" + conv;
  std::snprintf(buf, sizeof(buf), f.c_str(), p, x);
  std::string r(buf);
  if (type == 0 && r.find_first_of(".e") == std::string::npos) r += ".0";
  return r;
}

absl::StatusOr<Text> FormatNumber(Interpreter& in, const Value& v, const Spec& s) {
  const bool integral = !v.is_float();
  char type = s.type;
  bool as_float = !integral || type == 'e' || type == 'E' || type == 'f' || type == 'F' ||
                  type == 'g' || type == 'G' || type == '%';
  std::string digits, prefix;
  bool negative = false;
  if (!as_float) {
    static const std::string kIntTypes = "bcdoxXn";
    if (type != 0 && kIntTypes.find(type) == std::string::npos)
      return in.Error(UnknownCode(type, v));
    if (s.precision >= 0) {
      return in.Error("ValueError: Precision not allowed in integer format specifier");
    }
    int64_t x = v.as_int();
    negative = x < 0;
    uint64_t mag = negative ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
    if (type == 'c') {
      if (x < 0 || x > 0x10FFFF) return in.Error("OverflowError: %c arg not in range(0x110000)");
      digits = EncodeUtf8(std::u32string(1, static_cast<char32_t>(x)));
      negative = false;
    } else if (type == 'b' || type == 'o' || type == 'x' || type == 'X') {
      const unsigned base = type == 'b' ? 2 : type == 'o' ? 8 : 16;
      const char* alphabet = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      do {
        digits.insert(digits.begin(), alphabet[mag % base]);
        mag /= base;
      } while (mag);
      if (s.alt) prefix = type == 'b' ? "0b" : type == 'o' ? "0o" : type == 'x' ? "0x" : "0X";
      if (s.grouping == '_') digits = Group(digits, '_', 4);
      if (s.grouping == ',')
        return in.Error(
            absl::StrCat("ValueError: Cannot specify ',' with '", std::string(1, type), "'."));
    } else {
      digits = std::to_string(mag);
      if (s.grouping) digits = Group(digits, s.grouping, 3);
    }
  } else {
    static const std::string kFloatTypes = "eEfFgGn%";
    if (type != 0 && kFloatTypes.find(type) == std::string::npos) {
      return in.Error(UnknownCode(type, v));
    }
    double x = v.as_float();
    if (type == '%') x *= 100;
    negative = std::signbit(x) && !std::isnan(x);
    digits = FloatDigits(std::fabs(x), type, s.precision, s.alt);
    if (type == '%') digits += "%";
    if (s.grouping) {
      size_t end = digits.find_first_not_of("0123456789");
      if (end == std::string::npos) end = digits.size();
      digits = Group(digits.substr(0, end), s.grouping, 3) + digits.substr(end);
    }
  }
  std::string sign = negative ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  Text body;
  // Digits cannot spell a special token, but a character chosen by a number can, and the
  // number may be the client's: treat such a character as untrusted.
  body.Append(sign + prefix + digits, type == 'c');
  return Pad(body, sign.size() + prefix.size(), s, '>');
}

// ---- printf-style formatting

struct PercentArgs {
  List positional;
  const Dict* mapping = nullptr;
  size_t next = 0;
};

absl::StatusOr<Value> NextArg(Interpreter& in, PercentArgs& a) {
  if (a.next >= a.positional.size()) {
    return in.Error("TypeError: not enough arguments for format string");
  }
  return a.positional[a.next++];
}

absl::StatusOr<Text> PercentOne(Interpreter& in, const Value& arg, char type, Spec s, bool markup) {
  Value v = arg;
  switch (type) {
    case 's':
    case 'r':
    case 'a': {
      Text t;
      if (type == 's') {
        t = markup ? Escape(v).StrText() : v.StrText();
      } else {
        t.Append(v.Repr(), v.Tainted());
        if (markup) t = HtmlEscape(t);
      }
      t = Truncated(std::move(t), s.precision);
      s.precision = -1;
      s.zero = false;
      return Pad(t, 0, s, '>');
    }
    case 'd':
    case 'i':
    case 'u':
      if (!v.is_number()) {
        return in.Error(absl::StrCat("TypeError: %", std::string(1, type),
                                     " format: a real number is required, not ", v.TypeName()));
      }
      if (v.is_float()) {
        double d = v.as_float();
        if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return in.Error("integer overflow");
        v = Value(static_cast<int64_t>(d));
      }
      s.type = 'd';
      break;
    case 'x':
    case 'X':
    case 'o':
      if (!v.is_number() || v.is_float()) {
        return in.Error(absl::StrCat("TypeError: %", std::string(1, type),
                                     " format: an integer is required, not ", v.TypeName()));
      }
      s.type = type;
      break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      if (!v.is_number()) {
        return in.Error(absl::StrCat("TypeError: must be real number, not ", v.TypeName()));
      }
      v = Value(v.as_float());
      s.type = type;
      if (s.precision < 0) s.precision = 6;
      break;
    case 'c':
      if (v.is_string()) {
        if (CodePointCount(v.as_string()) != 1) {
          return in.Error("TypeError: %c requires int or char");
        }
        s.precision = -1;
        return Pad(v.StrText(), 0, s, '>');
      }
      if (!v.is_number() || v.is_float()) return in.Error("TypeError: %c requires int or char");
      s.type = 'c';
      break;
    default:
      return in.Error("ValueError: unsupported format character");
  }
  // printf's '#' for o is 0o in Python; '-' means left alignment.
  if (type == 'd' || type == 'i' || type == 'u') s.precision = -1;
  return FormatNumber(in, v, s);
}

}  // namespace

absl::StatusOr<Text> FormatSpec(Interpreter& in, const Value& value, const std::string& spec) {
  if (spec.empty()) return value.StrText();
  TMPL_ASSIGN_OR_RETURN(Spec s, ParseSpec(in, spec));
  if (value.is_string()) return FormatString(in, value, s);
  if (value.is_number()) return FormatNumber(in, value, s);
  return in.Error(absl::StrCat("TypeError: unsupported format string passed to ",
                               value.is_none() ? "NoneType" : value.TypeName(), ".__format__"));
}

absl::StatusOr<Value> PercentFormat(Interpreter& in, const Value& fmt, const Value& args) {
  const bool markup = fmt.is_markup();
  PercentArgs a;
  bool single = false;
  if (args.is_tuple()) {
    a.positional = args.as_list();
  } else {
    a.positional.push_back(args);
    single = true;
    if (args.is_dict()) a.mapping = &args.as_dict();
  }
  const Text f = fmt.StrText();
  const std::string& s = f.text;
  Text out;
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') continue;
    out.AppendSlice(f, run, i);
    ++i;
    if (i >= s.size()) return in.Error("ValueError: incomplete format");
    if (s[i] == '%') {
      out.AppendSlice(f, i, i + 1);
      run = i + 1;
      continue;
    }
    Value arg;
    bool have_arg = false;
    if (s[i] == '(') {
      if (!a.mapping) return in.Error("TypeError: format requires a mapping");
      size_t close = s.find(')', i);
      if (close == std::string::npos) return in.Error("ValueError: incomplete format key");
      const Value* found = a.mapping->Find(std::string_view(s).substr(i + 1, close - i - 1));
      if (!found) {
        return in.Error(absl::StrCat("KeyError: '", s.substr(i + 1, close - i - 1), "'"));
      }
      arg = *found;
      have_arg = true;
      i = close + 1;
    }
    Spec spec;
    for (; i < s.size(); ++i) {
      if (s[i] == '-') {
        spec.align = '<';
      } else if (s[i] == '+') {
        spec.sign = '+';
      } else if (s[i] == ' ') {
        if (spec.sign != '+') spec.sign = ' ';
      } else if (s[i] == '#') {
        spec.alt = true;
      } else if (s[i] == '0') {
        spec.zero = true;
      } else {
        break;
      }
    }
    auto number = [&](int64_t* out_value) -> absl::Status {
      if (i < s.size() && s[i] == '*') {
        ++i;
        TMPL_ASSIGN_OR_RETURN(Value w, NextArg(in, a));
        if (!w.is_number() || w.is_float()) return in.Error("TypeError: * wants int");
        int64_t n = w.as_int();
        if (n < 0 && out_value == &spec.width) {  // a negative * width means left-aligned
          spec.align = '<';
          n = n == INT64_MIN ? INT64_MAX : -n;
        }
        *out_value = std::clamp<int64_t>(n, 0, 1 << 20);
        return absl::OkStatus();
      }
      int64_t v = -1;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        v = std::min<int64_t>((v < 0 ? 0 : v) * 10 + (s[i] - '0'), 1 << 20);
        ++i;
      }
      if (v >= 0) *out_value = v;
      return absl::OkStatus();
    };
    TMPL_RETURN_IF_ERROR(number(&spec.width));
    if (i < s.size() && s[i] == '.') {
      ++i;
      spec.precision = 0;
      TMPL_RETURN_IF_ERROR(number(&spec.precision));
    }
    while (i < s.size() && (s[i] == 'h' || s[i] == 'l' || s[i] == 'L')) ++i;
    if (i >= s.size()) return in.Error("ValueError: incomplete format");
    const char type = s[i];
    if (std::string("sradiuxXoeEfFgGc").find(type) == std::string::npos) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%x", static_cast<unsigned char>(type));
      return in.Error(absl::StrCat("ValueError: unsupported format character '",
                                   std::string(1, type), "' (", hex, ") at index ", i));
    }
    if (spec.align == '<') spec.zero = false;
    if (!have_arg) {
      TMPL_ASSIGN_OR_RETURN(arg, NextArg(in, a));
    }
    TMPL_ASSIGN_OR_RETURN(Text piece, PercentOne(in, arg, type, spec, markup));
    out.Append(piece);
    run = i + 1;
  }
  out.AppendSlice(f, run, s.size());
  if (a.next < a.positional.size() && !(single && a.mapping)) {
    return in.Error("TypeError: not all arguments converted during string formatting");
  }
  TMPL_RETURN_IF_ERROR(in.Charge(out.text.size()));
  return markup ? Value::Markup(std::move(out)) : Value(std::move(out));
}

namespace {

// One replacement field's name, "0", "name", "0.attr", "name[key]".
absl::StatusOr<Value> LookupField(Interpreter& in, const std::string& field, const CallArgs& args,
                                  int64_t* auto_index) {
  size_t end = field.find_first_of(".[");
  std::string first = field.substr(0, end);
  Value obj;
  bool numeric = !first.empty() && first.find_first_not_of("0123456789") == std::string::npos;
  if (first.empty() || numeric) {
    int64_t index;
    if (first.empty()) {
      if (*auto_index < 0) {
        return in.Error(
            "ValueError: cannot switch from manual field specification to automatic field "
            "numbering");
      }
      index = (*auto_index)++;
    } else {
      if (*auto_index > 0) {
        return in.Error(
            "ValueError: cannot switch from automatic field numbering to manual field "
            "specification");
      }
      *auto_index = -1;
      index = std::stoll(first.substr(0, 9));
    }
    if (index >= static_cast<int64_t>(args.positional.size())) {
      return in.Error("IndexError: tuple index out of range");
    }
    obj = args.positional[index];
  } else {
    const Value* v = Arg(args, SIZE_MAX, first.c_str());
    if (!v) return in.Error(absl::StrCat("KeyError: '", first, "'"));
    obj = *v;
  }
  size_t i = end;
  while (i != std::string::npos && i < field.size()) {
    if (field[i] == '.') {
      size_t next = field.find_first_of(".[", i + 1);
      std::string attr =
          field.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
      if (attr.empty()) return in.Error("ValueError: Empty attribute in format string");
      TMPL_ASSIGN_OR_RETURN(obj, GetAttr(in, obj, attr));
      i = next;
    } else {
      size_t close = field.find(']', i);
      if (close == std::string::npos) return in.Error("ValueError: Missing ']' in format string");
      std::string key = field.substr(i + 1, close - i - 1);
      if (key.empty()) return in.Error("ValueError: Empty attribute in format string");
      Value k = key.find_first_not_of("0123456789") == std::string::npos
                    ? Value(static_cast<int64_t>(std::stoll(key.substr(0, 18))))
                    : Value(key);
      TMPL_ASSIGN_OR_RETURN(obj, GetItem(in, obj, k));
      i = close + 1;
      if (i < field.size() && field[i] != '.' && field[i] != '[') {
        return in.Error("ValueError: Only '.' or '[' may follow ']' in format field specifier");
      }
    }
  }
  return obj;
}

absl::StatusOr<Text> VFormat(Interpreter& in, const Text& f, const CallArgs& args, bool markup,
                             int64_t* auto_index, int depth) {
  if (depth > 2) return in.Error("ValueError: Max string recursion exceeded");
  const std::string& s = f.text;
  Text out;
  size_t i = 0, run = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') {
        out.AppendSlice(f, run, i + 1);
        i += 2;
        run = i;
        continue;
      }
      return in.Error("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      ++i;
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out.AppendSlice(f, run, i + 1);
      i += 2;
      run = i;
      continue;
    }
    out.AppendSlice(f, run, i);
    // Find the matching '}', allowing one level of nested fields in the spec.
    size_t j = i + 1;
    int nest = 1;
    while (j < s.size()) {
      if (s[j] == '{') ++nest;
      if (s[j] == '}' && --nest == 0) break;
      ++j;
    }
    if (j >= s.size()) {
      return in.Error(i + 1 >= s.size() ? "ValueError: Single '{' encountered in format string"
                                        : "ValueError: expected '}' before end of string");
    }
    std::string field = s.substr(i + 1, j - i - 1);
    std::string name = field, conversion, spec;
    size_t bang = std::string::npos, colon = std::string::npos;
    for (size_t k = 0, bracket = 0; k < field.size(); ++k) {
      if (field[k] == '[') bracket = 1;
      if (field[k] == ']') bracket = 0;
      if (bracket) continue;
      if (field[k] == '!' && bang == std::string::npos && colon == std::string::npos) bang = k;
      if (field[k] == ':') {
        colon = k;
        break;
      }
    }
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      name = field.substr(0, colon);
    }
    if (bang != std::string::npos) {
      conversion = name.substr(bang + 1);
      name = name.substr(0, bang);
      if (conversion.size() != 1 || std::string("rsa").find(conversion) == std::string::npos) {
        return in.Error(
            conversion.empty()
                ? "ValueError: end of string while looking for conversion specifier"
                : absl::StrCat("ValueError: Unknown conversion specifier ", conversion));
      }
    }
    TMPL_ASSIGN_OR_RETURN(Value v, LookupField(in, name, args, auto_index));
    if (conversion == "r" || conversion == "a") {
      Text t;
      t.Append(v.Repr(), v.Tainted());
      v = Value(std::move(t));
    } else if (conversion == "s") {
      v = Value(v.StrText());
    }
    if (spec.find('{') != std::string::npos) {
      TMPL_ASSIGN_OR_RETURN(Text nested,
                            VFormat(in, Text{spec, {}}, args, false, auto_index, depth + 1));
      spec = nested.text;
    }
    TMPL_ASSIGN_OR_RETURN(Text piece, FormatSpec(in, v, spec));
    if (markup && !(v.is_markup() && spec.empty())) piece = HtmlEscape(piece);
    out.Append(piece);
    i = j + 1;
    run = i;
  }
  out.AppendSlice(f, run, s.size());
  return out;
}

}  // namespace

absl::StatusOr<Value> StrFormat(Interpreter& in, const Value& fmt, const CallArgs& args) {
  int64_t auto_index = 0;
  TMPL_ASSIGN_OR_RETURN(Text out,
                        VFormat(in, fmt.StrText(), args, fmt.is_markup(), &auto_index, 0));
  TMPL_RETURN_IF_ERROR(in.Charge(out.text.size()));
  return fmt.is_markup() ? Value::Markup(std::move(out)) : Value(std::move(out));
}

}  // namespace tandem::chat_template
