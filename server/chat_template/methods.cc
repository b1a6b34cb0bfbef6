// The methods of str and dict that templates call (`content.strip()`, `message.get(...)`).
// Mutating methods are absent: transformers renders in jinja2's immutable sandbox.
#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/status_macros.h"
#include "server/chat_template/text.h"

namespace tandem::chat_template {
namespace {

absl::StatusOr<Value> StringMethod(Interpreter& in, const std::string& s, const std::string& name,
                                   CallArgs& args, bool& found) {
  found = true;
  const Value* a0 = Arg(args, 0, "");
  const Value* a1 = Arg(args, 1, "");
  auto opt_string = [&](const Value* v) -> const std::string* {
    return v && v->is_string() ? &v->as_string() : nullptr;
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    if (a0 && !a0->is_string() && !a0->is_none()) return in.Error(name + " arg must be str");
    return Value(PyStrip(s, opt_string(a0), name != "rstrip", name != "lstrip"));
  }
  if (name == "upper") return Value(AsciiUpper(s));
  if (name == "lower") return Value(AsciiLower(s));
  if (name == "capitalize") {
    std::string out = AsciiLower(s);
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
    return Value(out);
  }
  if (name == "title") {
    // str.title: a letter is upper-cased after a non-letter, lower-cased after a letter.
    std::string out = s;
    bool prev_cased = false;
    for (char& c : out) {
      bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
      if (lower && !prev_cased) c = static_cast<char>(c - 32);
      if (upper && prev_cased) c = static_cast<char>(c + 32);
      prev_cased = lower || upper;
    }
    return Value(out);
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
    List out;
    if (!sep || sep->is_none()) {
      std::u32string u = DecodeUtf8(s);
      size_t i = 0;
      int64_t done = 0;
      while (true) {
        while (i < u.size() && IsPySpace(u[i])) ++i;
        if (i >= u.size()) break;
        if (maxsplit >= 0 && done >= maxsplit) {
          size_t e = u.size();
          while (e > i && IsPySpace(u[e - 1])) --e;
          out.emplace_back(EncodeUtf8(u.substr(i, e - i)));
          break;
        }
        size_t j = i;
        while (j < u.size() && !IsPySpace(u[j])) ++j;
        out.emplace_back(EncodeUtf8(u.substr(i, j - i)));
        ++done;
        i = j;
      }
      return Value(std::move(out));
    }
    if (!sep->is_string()) return in.Error("split() separator must be str or None");
    const std::string& p = sep->as_string();
    if (p.empty()) return in.Error("empty separator");
    if (name == "rsplit" && maxsplit >= 0) {
      std::vector<std::string> parts;
      size_t end = s.size();
      int64_t done = 0;
      while (done < maxsplit) {
        if (end < p.size()) break;
        size_t f = s.rfind(p, end - p.size());
        if (f == std::string::npos) break;
        parts.push_back(s.substr(f + p.size(), end - f - p.size()));
        end = f;
        ++done;
      }
      parts.push_back(s.substr(0, end));
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) out.emplace_back(*it);
      return Value(std::move(out));
    }
    size_t pos = 0;
    int64_t done = 0;
    while (maxsplit < 0 || done < maxsplit) {
      size_t f = s.find(p, pos);
      if (f == std::string::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + p.size();
      ++done;
    }
    out.emplace_back(s.substr(pos));
    TMPL_RETURN_IF_ERROR(in.Charge(out.size()));
    return Value(std::move(out));
  }
  if (name == "replace") {
    if (!a0 || !a1 || !a0->is_string() || !a1->is_string()) {
      return in.Error("replace() takes two strings");
    }
    const Value* c = Arg(args, 2, "count");
    auto out = ReplaceAll(s, a0->as_string(), a1->as_string(),
                          c && c->is_number() ? c->as_int() : -1, in.limits().max_output_bytes);
    if (!out) return in.Error("replace result too large");
    TMPL_RETURN_IF_ERROR(in.Charge(out->size()));
    return Value(std::move(*out));
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
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return in.Error(absl::StrCat("sequence item ", i, ": expected str instance, ",
                                     items[i].TypeName(), " found"));
      }
      if (i) out += s;
      out += items[i].as_string();
    }
    TMPL_RETURN_IF_ERROR(in.Charge(out.size()));
    return Value(std::move(out));
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
    for (const auto& [k, v] : d.items()) out.push_back(Value::Tuple(List{Value(k), v}));
    return Value(std::move(out));
  }
  if (name == "keys") {
    List out;
    for (const auto& [k, v] : d.items()) out.emplace_back(k);
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
    if (key->is_string()) {
      if (const Value* v = d.Find(key->as_string())) return *v;
    }
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
    r = StringMethod(in, obj.as_string(), name, args, found);
  } else if (obj.is_dict()) {
    // A key shadows nothing here: jinja2 resolves `d.items` to the method first.
    r = DictMethod(in, obj.as_dict(), name, args, found);
  }
  if (!found) return std::nullopt;
  return r;
}

}  // namespace tandem::chat_template
