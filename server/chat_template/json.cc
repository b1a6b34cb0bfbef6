// json.dumps as transformers' tojson override calls it: ensure_ascii=False (non-ASCII kept
// raw), key order preserved unless sort_keys, no HTML escaping (unlike jinja2's own tojson).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/status_macros.h"
#include "server/chat_template/text.h"

namespace tandem::chat_template {
namespace {

void QuoteJsonAscii(unsigned char c, std::string& out) {
  switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char b[8];
        std::snprintf(b, sizeof(b), "\\u%04x", c);
        out += b;
      } else {
        out += static_cast<char>(c);
      }
  }
}

void QuoteJson(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  if (!ensure_ascii) {
    for (unsigned char c : s) QuoteJsonAscii(c, out);  // UTF-8 bytes pass through
    out += '"';
    return;
  }
  // json.dumps(ensure_ascii=True): every non-ASCII code point as \uXXXX, astral ones as a
  // surrogate pair.
  for (char32_t cp : DecodeUtf8(s)) {
    char b[16];
    if (cp < 0x80) {
      QuoteJsonAscii(static_cast<unsigned char>(cp), out);
    } else if (cp < 0x10000) {
      std::snprintf(b, sizeof(b), "\\u%04x", static_cast<unsigned>(cp));
      out += b;
    } else {
      unsigned v = static_cast<unsigned>(cp) - 0x10000;
      std::snprintf(b, sizeof(b), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      out += b;
    }
  }
  out += '"';
}

struct Dumper {
  const std::string* indent;
  std::string item_sep;
  std::string key_sep;
  bool sort_keys;
  bool ensure_ascii;
  size_t max_bytes;
  std::string out;

  void Newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *indent;
  }

  absl::Status Dump(const Value& v, int level) {
    if (level > 512) return absl::InvalidArgumentError("nesting too deep");
    if (out.size() > max_bytes) return absl::InvalidArgumentError("result too large");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return absl::OkStatus();
      case Value::Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return absl::OkStatus();
      case Value::Kind::kInt:
        out += std::to_string(v.as_int());
        return absl::OkStatus();
      case Value::Kind::kFloat: {
        double d = v.as_float();
        if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d > 0 ? "Infinity" : "-Infinity";
        } else {
          out += FormatFloat(d);
        }
        return absl::OkStatus();
      }
      case Value::Kind::kString:
        QuoteJson(v.as_string(), ensure_ascii, out);
        return absl::OkStatus();
      case Value::Kind::kList: {
        if (v.is_generator()) {
          return absl::InvalidArgumentError("Object of type generator is not JSON serializable");
        }
        const List& l = v.as_list();
        if (l.empty()) {
          out += "[]";
          return absl::OkStatus();
        }
        out += '[';
        for (size_t i = 0; i < l.size(); ++i) {
          if (i) out += item_sep;
          if (indent) Newline(level + 1);
          TMPL_RETURN_IF_ERROR(Dump(l[i], level + 1));
        }
        if (indent) Newline(level);
        out += ']';
        return absl::OkStatus();
      }
      case Value::Kind::kDict: {
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& kv : v.as_dict().items()) items.push_back(&kv);
        if (items.empty()) {
          out += "{}";
          return absl::OkStatus();
        }
        if (sort_keys) TMPL_RETURN_IF_ERROR(SortKeys(items));
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent) Newline(level + 1);
          TMPL_ASSIGN_OR_RETURN(std::string key, KeyString(items[i]->first));
          QuoteJson(key, ensure_ascii, out);
          out += key_sep;
          TMPL_RETURN_IF_ERROR(Dump(items[i]->second, level + 1));
        }
        if (indent) Newline(level);
        out += '}';
        return absl::OkStatus();
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
    }
  }

  // json.dumps turns the keys it accepts into strings.
  static absl::StatusOr<std::string> KeyString(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString:
        return k.as_string();
      case Value::Kind::kBool:
        return std::string(k.as_bool() ? "true" : "false");
      case Value::Kind::kNone:
        return std::string("null");
      case Value::Kind::kInt:
        return std::to_string(k.as_int());
      case Value::Kind::kFloat: {
        double d = k.as_float();
        if (std::isnan(d)) return std::string("NaN");
        if (std::isinf(d)) return std::string(d > 0 ? "Infinity" : "-Infinity");
        return FormatFloat(d);
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("keys must be str, int, float, bool or None, not ", k.TypeName()));
    }
  }

  // sorted(dict.items()): keys of different kinds do not compare.
  static absl::Status SortKeys(std::vector<const std::pair<Value, Value>*>& items) {
    absl::Status err;
    std::stable_sort(items.begin(), items.end(), [&](auto* a, auto* b) {
      const Value& x = a->first;
      const Value& y = b->first;
      if (x.is_number() && y.is_number()) return x.as_float() < y.as_float();
      if (x.is_string() && y.is_string()) return x.as_string() < y.as_string();
      if (err.ok()) {
        err = absl::InvalidArgumentError(absl::StrCat(
            "'<' not supported between instances of '", x.is_none() ? "NoneType" : x.TypeName(),
            "' and '", y.is_none() ? "NoneType" : y.TypeName(), "'"));
      }
      return false;
    });
    return err;
  }
};

}  // namespace

absl::StatusOr<std::string> DumpJson(const Value& v, const std::string* indent,
                                     const std::string& item_sep, const std::string& key_sep,
                                     bool sort_keys, bool ensure_ascii, size_t max_bytes) {
  Dumper d{indent, item_sep, key_sep, sort_keys, ensure_ascii, max_bytes, {}};
  TMPL_RETURN_IF_ERROR(d.Dump(v, 0));
  if (d.out.size() > max_bytes) return absl::InvalidArgumentError("result too large");
  return std::move(d.out);
}

}  // namespace tandem::chat_template
