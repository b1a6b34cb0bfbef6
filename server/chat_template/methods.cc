// The methods of str and dict that templates call (`content.strip()`, `message.get(...)`).
// Mutating methods are absent: transformers renders in jinja2's immutable sandbox.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/format.h"
#include "server/chat_template/markup.h"
#include "server/chat_template/status_macros.h"
#include "server/chat_template/text.h"

namespace tandem::chat_template {
namespace {

// A str method's result on `obj`: markupsafe wraps the str methods that build strings so that
// a Markup gives a Markup back.
Value Like(const Value& obj, Text t) {
  return obj.is_markup() ? Value::Markup(std::move(t)) : Value(std::move(t));
}

absl::StatusOr<Value> StringMethod(Interpreter& in, const Value& obj, const std::string& name,
                                   CallArgs& args, bool& found) {
  found = true;
  const std::string& s = obj.as_string();
  if (name == "format") return StrFormat(in, obj, args);
  if (name == "format_map") {
    const Value* m = Arg(args, 0, "");
    if (!m || !m->is_dict()) return in.Error("format_map() takes a mapping");
    CallArgs named;
    for (const auto& [k, v] : m->as_dict().items()) {
      if (k.is_string()) named.keyword.emplace_back(k.as_string(), v);
    }
    return StrFormat(in, obj, named);
  }
  const Value* a0 = Arg(args, 0, "");
  const Value* a1 = Arg(args, 1, "");
  auto opt_string = [&](const Value* v) -> const std::string* {
    return v && v->is_string() ? &v->as_string() : nullptr;
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    if (a0 && !a0->is_string() && !a0->is_none()) return in.Error(name + " arg must be str");
    return Like(obj, StripText(obj.StrText(), opt_string(a0), name != "rstrip", name != "lstrip"));
  }
  // ASCII case mappings keep every byte in place, so the provenance carries over unchanged.
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    Text t = obj.StrText();
    std::string& out = t.text;
    if (name == "upper") out = AsciiUpper(std::move(out));
    if (name == "lower" || name == "capitalize") out = AsciiLower(std::move(out));
    if (name == "capitalize" && !out.empty() && out[0] >= 'a' && out[0] <= 'z') {
      out[0] = static_cast<char>(out[0] - 32);
    }
    if (name == "title") {
      // str.title: a letter is upper-cased after a non-letter, lower-cased after a letter.
      bool prev_cased = false;
      for (char& c : out) {
        bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
        if (lower && !prev_cased) c = static_cast<char>(c - 32);
        if (upper && prev_cased) c = static_cast<char>(c + 32);
        prev_cased = lower || upper;
      }
    }
    return Like(obj, std::move(t));
  }
  if (name == "startswith" || name == "endswith") {
    if (!a0) return in.Error(name + "() takes at least 1 argument");
    List candidates;
    if (a0->is_list()) {
      candidates = a0->as_list();
    } else {
      candidates.push_back(*a0);
    }
    for (const Value& c : candidates) {
      if (!c.is_string()) return in.Error(name + " arg must be str or a tuple of str");
      const std::string& p = c.as_string();
      if (p.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, p.size(), p) == 0
                               : s.compare(s.size() - p.size(), p.size(), p) == 0) {
        return Value(true);
      }
    }
    return Value(false);
  }
  if (name == "split" || name == "rsplit") {
    int64_t maxsplit = a1 && a1->is_number() ? a1->as_int() : -1;
    if (const Value* m = Arg(args, 99, "maxsplit")) maxsplit = m->as_int();
    const Value* sep = a0 ? a0 : Arg(args, 99, "sep");
    const Text text = obj.StrText();
    std::vector<std::pair<size_t, size_t>> parts;  // byte ranges, in order
    if (!sep || sep->is_none()) {
      std::vector<size_t> at;
      std::u32string u = DecodeUtf8(s, &at);
      size_t i = 0;
      int64_t done = 0;
      while (true) {
        while (i < u.size() && IsPySpace(u[i])) ++i;
        if (i >= u.size()) break;
        if (maxsplit >= 0 && done >= maxsplit) {
          size_t e = u.size();
          while (e > i && IsPySpace(u[e - 1])) --e;
          parts.emplace_back(at[i], at[e]);
          break;
        }
        size_t j = i;
        while (j < u.size() && !IsPySpace(u[j])) ++j;
        parts.emplace_back(at[i], at[j]);
        ++done;
        i = j;
      }
    } else {
      if (!sep->is_string()) return in.Error("split() separator must be str or None");
      const std::string& p = sep->as_string();
      if (p.empty()) return in.Error("empty separator");
      if (name == "rsplit" && maxsplit >= 0) {
        size_t end = s.size();
        int64_t done = 0;
        while (done < maxsplit && end >= p.size()) {
          size_t f = s.rfind(p, end - p.size());
          if (f == std::string::npos) break;
          parts.emplace_back(f + p.size(), end);
          end = f;
          ++done;
        }
        parts.emplace_back(0, end);
        std::reverse(parts.begin(), parts.end());
      } else {
        size_t pos = 0;
        int64_t done = 0;
        while (maxsplit < 0 || done < maxsplit) {
          size_t f = s.find(p, pos);
          if (f == std::string::npos) break;
          parts.emplace_back(pos, f);
          pos = f + p.size();
          ++done;
        }
        parts.emplace_back(pos, s.size());
      }
    }
    TMPL_RETURN_IF_ERROR(in.Charge(parts.size()));
    List out;
    for (const auto& [b, e] : parts) {
      Text piece;
      piece.AppendSlice(text, b, e);
      out.push_back(Like(obj, std::move(piece)));
    }
    return Value(std::move(out));
  }
  if (name == "replace") {
    if (!a0 || !a1 || !a0->is_string() || !a1->is_string()) {
      return in.Error("replace() takes two strings");
    }
    const Value* c = Arg(args, 2, "count");
    // Markup.replace escapes its arguments.
    const std::string from = obj.is_markup() ? Escape(*a0).as_string() : a0->as_string();
    const Text to = obj.is_markup() ? Escape(*a1).StrText() : a1->StrText();
    auto out = ReplaceText(obj.StrText(), from, to, c && c->is_number() ? c->as_int() : -1,
                           in.limits().max_output_bytes);
    if (!out) return in.Error("replace result too large");
    TMPL_RETURN_IF_ERROR(in.Charge(out->text.size()));
    return Like(obj, std::move(*out));
  }
  if (name == "find" || name == "count") {
    if (!a0 || !a0->is_string()) return in.Error(name + "() takes a string");
    const std::string& p = a0->as_string();
    if (name == "find") {
      size_t f = s.find(p);
      if (f == std::string::npos) return Value(int64_t{-1});
      return Value(static_cast<int64_t>(CodePointCount(s.substr(0, f))));
    }
    if (p.empty()) return Value(static_cast<int64_t>(CodePointCount(s) + 1));
    int64_t n = 0;
    for (size_t f = s.find(p); f != std::string::npos; f = s.find(p, f + p.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    if (!a0) return in.Error("join() takes one argument");
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, *a0));
    const Text sep = obj.StrText();
    Text out;
    for (size_t i = 0; i < items.size(); ++i) {
      // Markup.join escapes its items (and accepts any, as escape() does).
      if (!items[i].is_string() && !obj.is_markup()) {
        return in.Error(absl::StrCat("sequence item ", i, ": expected str instance, ",
                                     items[i].TypeName(), " found"));
      }
      if (i) out.Append(sep);
      out.Append(obj.is_markup() ? Escape(items[i]).StrText() : items[i].StrText());
    }
    TMPL_RETURN_IF_ERROR(in.Charge(out.text.size()));
    return Like(obj, std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    if (s.empty()) return Value(false);
    for (unsigned char c : s) {
      bool ok = name == "isdigit"   ? (c >= '0' && c <= '9')
                : name == "isspace" ? IsPySpace(c)
                : name == "isalpha"
                    ? ((c | 32) >= 'a' && (c | 32) <= 'z')
                    : (((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9'));
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  found = false;
  return Value();
}

absl::StatusOr<Value> DictMethod(Interpreter& in, const Dict& d, const std::string& name,
                                 CallArgs& args, bool& found) {
  found = true;
  if (name == "items") {
    List out;
    for (const auto& [k, v] : d.items()) out.push_back(Value::Tuple(List{k, v}));
    return Value(std::move(out));
  }
  if (name == "keys") {
    List out;
    for (const auto& [k, v] : d.items()) out.push_back(k);
    return Value(std::move(out));
  }
  if (name == "values") {
    List out;
    for (const auto& [k, v] : d.items()) out.push_back(v);
    return Value(std::move(out));
  }
  if (name == "get") {
    const Value* key = Arg(args, 0, "");
    if (!key) return in.Error("get expected at least 1 argument");
    const Value* def = Arg(args, 1, "");
    if (!Hashable(*key)) return in.Error(absl::StrCat("unhashable type: '", key->TypeName(), "'"));
    if (const Value* v = d.Find(*key)) return *v;
    return def ? *def : Value::None();
  }
  found = false;
  return Value();
}

}  // namespace

std::optional<absl::StatusOr<Value>> CallMethod(Interpreter& in, const Value& obj,
                                                const std::string& name, CallArgs& args) {
  bool found = false;
  absl::StatusOr<Value> r;
  if (obj.is_string()) {
    r = StringMethod(in, obj, name, args, found);
  } else if (obj.is_dict()) {
    // A key shadows nothing here: jinja2 resolves `d.items` to the method first.
    r = DictMethod(in, obj.as_dict(), name, args, found);
  }
  if (!found) return std::nullopt;
  return r;
}

bool MethodKeepsProvenance(const std::string& name) {
  static const auto* names = new std::set<std::string>{
      "capitalize", "format", "format_map", "get",   "items", "join",  "keys",  "lower", "lstrip",
      "replace",    "rsplit", "rstrip",     "split", "strip", "title", "upper", "values"};
  return names->count(name) > 0;
}

}  // namespace tandem::chat_template
