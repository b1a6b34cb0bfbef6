// jinja2's built-in filters (3.1 semantics) plus transformers' tojson override.
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/format.h"
#include "server/chat_template/markup.h"
#include "server/chat_template/status_macros.h"
#include "server/chat_template/text.h"

namespace tandem::chat_template {
namespace {

const std::set<std::string>& FilterNames() {
  static const auto* names = new std::set<std::string>{
      "abs",   "attr",   "capitalize", "count",      "d",           "default",  "dictsort",
      "e",     "escape", "first",      "float",      "forceescape", "format",   "indent",
      "int",   "items",  "join",       "last",       "length",      "list",     "lower",
      "map",   "max",    "min",        "reject",     "rejectattr",  "replace",  "reverse",
      "round", "safe",   "select",     "selectattr", "sort",        "string",   "sum",
      "title", "tojson", "trim",       "unique",     "upper",       "wordcount"};
  return *names;
}

// Their string results are elements of the input, or built with exact provenance.
const std::set<std::string>& ProvenanceKeepingFilters() {
  static const auto* names = new std::set<std::string>{
      "attr",    "capitalize",  "d",      "default", "dictsort",   "e",      "escape",
      "first",   "forceescape", "format", "indent",  "items",      "join",   "last",
      "list",    "lower",       "map",    "max",     "min",        "reject", "rejectattr",
      "replace", "reverse",     "safe",   "select",  "selectattr", "sort",   "string",
      "title",   "trim",        "unique", "upper"};
  return *names;
}

// A str method applied to a str or Markup with its provenance (the ASCII case mappings keep
// every byte where it was); a Markup stays one, as markupsafe wraps these methods.
Value MapCase(const Value& v, std::string (*f)(std::string)) {
  Text t = v.StrText();
  t.text = f(std::move(t.text));
  return v.is_markup() ? Value::Markup(std::move(t)) : Value(std::move(t));
}

std::string Capitalize(std::string s) {
  s = AsciiLower(std::move(s));
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 32);
  return s;
}

// jinja2's title filter: words start after whitespace, '-', '(', '{', '[' and '<'.
std::string TitleWords(std::string s) {
  bool at_start = true;
  for (char& c : s) {
    bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
               c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      at_start = true;
    } else if (at_start) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
      at_start = false;
    } else if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c + 32);
    }
  }
  return s;
}

bool ArgBool(const CallArgs& args, size_t i, const char* name, bool def) {
  const Value* v = Arg(args, i, name);
  return v ? v->Truthy() : def;
}

// environment.getitem over a dotted path ("function.name"), as attribute filters use it.
absl::StatusOr<Value> Attribute(Interpreter& in, const Value& item, const std::string& path) {
  Value cur = item;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (numeric && cur.is_list()) {
      TMPL_ASSIGN_OR_RETURN(cur, GetItem(in, cur, Value(static_cast<int64_t>(std::stoll(part)))));
    } else if (cur.is_undefined()) {
      return cur;
    } else {
      TMPL_ASSIGN_OR_RETURN(cur, GetItem(in, cur, Value(part)));
    }
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

// Sort key: strings fold case unless case_sensitive, as jinja2's ignore_case does.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(AsciiLower(v.as_string()));
  return v;
}

absl::StatusOr<List> SortValues(Interpreter& in, List items, bool reverse, bool case_sensitive,
                                const Value* attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) {
    Value key = v;
    if (attribute && attribute->is_string()) {
      TMPL_ASSIGN_OR_RETURN(key, Attribute(in, v, attribute->as_string()));
    }
    keyed.emplace_back(SortKey(key, case_sensitive), std::move(v));
  }
  absl::Status err;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    if (!err.ok()) return false;
    auto lt = reverse ? LessThan(in, b.first, a.first) : LessThan(in, a.first, b.first);
    if (!lt.ok()) {
      err = lt.status();
      return false;
    }
    return *lt;
  });
  if (!err.ok()) return err;
  List out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

absl::StatusOr<Value> Round(Interpreter& in, const Value& v, const CallArgs& args) {
  const Value* p = Arg(args, 0, "precision");
  const Value* m = Arg(args, 1, "method");
  int64_t precision = p ? p->as_int() : 0;
  std::string method = m && m->is_string() ? m->as_string() : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return in.Error("method must be common, ceil or floor");
  }
  if (!v.is_number()) {
    return in.Error(absl::StrCat("type ", v.TypeName(), " doesn't define __round__ method"));
  }
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());  // round(int, n) stays an int
    double x = v.as_float();
    if (!std::isfinite(x) || precision > 300) return Value(x);
    if (precision == 0) {
      std::fesetround(FE_TONEAREST);
      return Value(std::nearbyint(x));
    }
    // Correctly rounded decimal conversion, like Python's round(x, n) for n > 0.
    char buf[512];
    if (precision < 0) {
      double scale = std::pow(10.0, static_cast<double>(-precision));
      return Value(std::nearbyint(x / scale) * scale);
    }
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
    return Value(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

absl::StatusOr<Value> ToInt(const Value& v, const CallArgs& args) {
  const Value* def = Arg(args, 0, "default");
  Value fallback = def ? *def : Value(int64_t{0});
  if (v.is_bool() || v.is_int()) return Value(v.as_int());
  if (v.is_float()) {
    double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.as_string(), nullptr, true, true);
    std::string digits;
    for (char c : s) {
      if (c != '_') digits += c;
    }
    if (!digits.empty()) {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(digits.c_str(), &end, 10);
      if (*end == '\0' && errno == 0) return Value(static_cast<int64_t>(x));
      end = nullptr;
      double d = std::strtod(digits.c_str(), &end);
      if (*end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18 &&
          digits.find_first_of("xXpP") == std::string::npos) {
        return Value(static_cast<int64_t>(d));
      }
    }
  }
  return fallback;
}

absl::StatusOr<Value> ToFloat(const Value& v, const CallArgs& args) {
  const Value* def = Arg(args, 0, "default");
  Value fallback = def ? *def : Value(0.0);
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    std::string s = PyStrip(v.as_string(), nullptr, true, true);
    if (!s.empty() && s.find_first_of("xXpP") == std::string::npos) {
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (*end == '\0') return Value(d);
    }
  }
  return fallback;
}

// str.splitlines() as byte ranges.
std::vector<std::pair<size_t, size_t>> SplitLines(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> lines;
  size_t begin = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' ||
        c == '\x1e') {
      lines.emplace_back(begin, i);
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      begin = i + 1;
    }
  }
  if (begin < s.size()) lines.emplace_back(begin, s.size());
  return lines;
}

absl::StatusOr<Value> Indent(Interpreter& in, const Value& v, const CallArgs& args) {
  const Value* w = Arg(args, 0, "width");
  Text indention;
  if (w && w->is_string()) {
    indention = w->StrText();
  } else {
    int64_t width = w ? w->as_int() : 4;
    if (width > 1024) return in.Error("indent width too large");
    indention.Append(std::string(std::max<int64_t>(width, 0), ' '));
  }
  bool first = ArgBool(args, 1, "first", false);
  bool blank = ArgBool(args, 2, "blank", false);
  Text s = v.StrText();
  s.Append("\n");  // jinja2 appends a newline so splitlines keeps the last line
  const auto lines = SplitLines(s.text);
  Text rv;
  if (first) rv.Append(indention);
  for (size_t i = 0; i < lines.size(); ++i) {
    const bool empty = lines[i].first == lines[i].second;
    if (i > 0) {
      rv.Append("\n");
      if (blank || !empty) rv.Append(indention);
    }
    rv.AppendSlice(s, lines[i].first, lines[i].second);
    if (rv.text.size() > in.limits().max_output_bytes) return in.Error("indent result too large");
  }
  TMPL_RETURN_IF_ERROR(in.Charge(rv.text.size()));
  // A Markup stays one (jinja2 joins its lines with Markup newlines).
  return v.is_markup() ? Value::Markup(std::move(rv)) : Value(std::move(rv));
}

// Shared by select/reject/selectattr/rejectattr: args after the attribute are the test
// name and its arguments.
// jinja2's select/reject/map iterate only a true value (`if value: for item in value`), so
// None, undefined, 0 and '' give an empty generator while other non-iterables fail.
absl::StatusOr<List> IterateIfTrue(Interpreter& in, const Value& v) {
  if (!v.Truthy()) return List{};
  if (v.is_number() || v.is_callable() || v.is_namespace()) {
    return in.Error(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
  return Iterate(in, v);
}

absl::StatusOr<Value> SelectLike(Interpreter& in, const Value& v, const CallArgs& args,
                                 bool by_attr, bool keep_if) {
  TMPL_ASSIGN_OR_RETURN(List items, IterateIfTrue(in, v));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return in.Error("selectattr/rejectattr need an attribute name");
    }
    attr = args.positional[0].as_string();
    next = 1;
  }
  std::string test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return in.Error("test name must be a string");
    test = args.positional[next].as_string();
    test_args.positional.assign(args.positional.begin() + next + 1, args.positional.end());
    test_args.keyword = args.keyword;
  }
  List out;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attr) {
      TMPL_ASSIGN_OR_RETURN(subject, Attribute(in, item, attr));
    }
    bool r;
    if (test.empty()) {
      r = subject.Truthy();
    } else {
      TMPL_ASSIGN_OR_RETURN(r, in.Test(test, subject, test_args));
    }
    if (r == keep_if) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

absl::StatusOr<Value> Map(Interpreter& in, const Value& v, const CallArgs& args) {
  TMPL_ASSIGN_OR_RETURN(List items, IterateIfTrue(in, v));
  List out;
  const Value* attribute = nullptr;
  const Value* def = nullptr;
  for (const auto& [k, x] : args.keyword) {
    if (k == "attribute") attribute = &x;
    if (k == "default") def = &x;
  }
  if (attribute && args.positional.empty()) {
    if (!attribute->is_string()) return in.Error("map attribute must be a string");
    for (const Value& item : items) {
      TMPL_ASSIGN_OR_RETURN(Value a, Attribute(in, item, attribute->as_string()));
      out.push_back(a.is_undefined() && def ? *def : a);
    }
    return Value::Generator(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return in.Error("map needs a filter name or attribute=");
  }
  std::string filter = args.positional[0].as_string();
  CallArgs fargs;
  fargs.positional.assign(args.positional.begin() + 1, args.positional.end());
  fargs.keyword = args.keyword;
  for (const Value& item : items) {
    TMPL_ASSIGN_OR_RETURN(Value r, in.Filter(filter, item, fargs));
    out.push_back(std::move(r));
  }
  return Value::Generator(std::move(out));
}

absl::StatusOr<Value> ToJson(Interpreter& in, const Value& v, const CallArgs& args) {
  const Value* ind = Arg(args, 0, "indent");
  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  const Value* sort = Arg(args, 99, "sort_keys");
  const Value* seps = Arg(args, 99, "separators");
  std::string indent_str;
  const std::string* indent = nullptr;
  if (ind && !ind->is_none()) {
    if (ind->is_string()) {
      indent_str = ind->as_string();
    } else if (ind->is_number() && !ind->is_float()) {
      if (ind->as_int() > 1024) return in.Error("tojson indent too large");
      indent_str = std::string(std::max<int64_t>(ind->as_int(), 0), ' ');
    } else {
      return in.Error("tojson indent must be an integer or a string");
    }
    indent = &indent_str;
  }
  std::string item_sep = indent ? "," : ", ";
  std::string key_sep = ": ";
  if (seps && !seps->is_none()) {
    if (!seps->is_list() || seps->as_list().size() != 2 || !seps->as_list()[0].is_string() ||
        !seps->as_list()[1].is_string()) {
      return in.Error("tojson separators must be a pair of strings");
    }
    item_sep = seps->as_list()[0].as_string();
    key_sep = seps->as_list()[1].as_string();
  }
  auto r = DumpJson(v, indent, item_sep, key_sep, sort && sort->Truthy(),
                    Arg(args, 99, "ensure_ascii") && Arg(args, 99, "ensure_ascii")->Truthy(),
                    in.limits().max_output_bytes);
  if (!r.ok()) return in.Error(absl::StrCat("tojson: ", r.status().message()));
  TMPL_RETURN_IF_ERROR(in.Charge(r->size()));
  return Value(std::move(*r));
}

}  // namespace

bool IsFilterName(const std::string& name) { return FilterNames().count(name) > 0; }

bool FilterKeepsProvenance(const std::string& name) {
  return ProvenanceKeepingFilters().count(name) > 0;
}

absl::StatusOr<Value> ApplyFilter(Interpreter& in, const std::string& name, const Value& v,
                                  CallArgs& args) {
  if (name == "default" || name == "d") {
    const Value* def = Arg(args, 0, "default_value");
    bool boolean = ArgBool(args, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.Truthy())) return def ? *def : Value("");
    return v;
  }
  if (name == "tojson") return ToJson(in, v, args);
  if (name == "safe") return Value::Markup(v.StrText());
  if (name == "string") {
    // soft_str: a str (or Markup) is returned as it is.
    if (v.is_undefined()) return Value("");
    if (v.is_string()) return v;
    return Value(v.StrText());
  }
  if (name == "trim") {
    const Value* chars = Arg(args, 0, "chars");
    Text t = StripText(v.StrText(), chars && chars->is_string() ? &chars->as_string() : nullptr,
                       true, true);
    return v.is_markup() ? Value::Markup(std::move(t)) : Value(std::move(t));
  }
  if (name == "upper") return MapCase(v, AsciiUpper);
  if (name == "lower") return MapCase(v, AsciiLower);
  if (name == "capitalize") return MapCase(v, Capitalize);
  if (name == "title") return MapCase(v, TitleWords);
  if (name == "escape" || name == "e") return Escape(v);
  if (name == "forceescape") return Value::Markup(HtmlEscape(v.StrText()));
  if (name == "format") {
    if (!args.positional.empty() && !args.keyword.empty()) {
      return in.Error(
          "format filter: can't handle positional and keyword arguments at the same time");
    }
    if (!args.keyword.empty()) {
      Dict d;
      for (const auto& [k, x] : args.keyword) d.Set(k, x);
      return PercentFormat(in, v.is_string() ? v : Value(v.StrText()), Value(std::move(d)));
    }
    return PercentFormat(in, v.is_string() ? v : Value(v.StrText()), Value::Tuple(args.positional));
  }
  if (name == "length" || name == "count") {
    switch (v.kind()) {
      case Value::Kind::kUndefined:
        return Value(int64_t{0});
      case Value::Kind::kString:
        return Value(static_cast<int64_t>(CodePointCount(v.as_string())));
      case Value::Kind::kList:
        if (v.is_generator()) break;
        return Value(static_cast<int64_t>(v.as_list().size()));
      case Value::Kind::kDict:
        return Value(static_cast<int64_t>(v.as_dict().size()));
      default:
        break;
    }
    return in.Error(absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (char c : v.Str()) {
      bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "first" || name == "last") {
    if (v.is_undefined()) return Value::Undefined("first");
    if (name == "last" && v.is_generator()) {
      return in.Error("'generator' object is not reversible");
    }
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    if (items.empty()) return Value::Undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const Value* sep = Arg(args, 0, "d");
    const Value* attribute = Arg(args, 1, "attribute");
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    // With autoescape off jinja2 joins str() of everything into a plain str.
    const Text s = sep ? sep->StrText() : Text();
    Text out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out.Append(s);
      Value item = items[i];
      if (attribute && attribute->is_string()) {
        TMPL_ASSIGN_OR_RETURN(item, Attribute(in, item, attribute->as_string()));
      }
      out.Append(item.StrText());
      if (out.text.size() > in.limits().max_output_bytes) {
        return in.Error("join result too large");
      }
    }
    TMPL_RETURN_IF_ERROR(in.Charge(out.text.size()));
    return Value(std::move(out));
  }
  if (name == "replace") {
    const Value* from = Arg(args, 0, "old");
    const Value* to = Arg(args, 1, "new");
    const Value* count = Arg(args, 2, "count");
    if (!from || !to) return in.Error("replace needs old and new");
    // With autoescape off: str(s).replace(str(old), str(new), count), a plain str.
    auto out = ReplaceText(v.StrText(), from->Str(), to->StrText(),
                           count && !count->is_none() ? count->as_int() : -1,
                           in.limits().max_output_bytes);
    if (!out) return in.Error("replace result too large");
    TMPL_RETURN_IF_ERROR(in.Charge(out->text.size()));
    return Value(std::move(*out));
  }
  if (name == "round") return Round(in, v, args);
  if (name == "int") return ToInt(v, args);
  if (name == "float") return ToFloat(v, args);
  if (name == "abs") {
    if (!v.is_number())
      return in.Error(absl::StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    if (v.as_int() == INT64_MIN) return in.Error("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (name == "list") {
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    return Value(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value(List{});
    if (!v.is_dict())
      return in.Error(absl::StrCat("items filter needs a mapping, got ", v.TypeName()));
    CallArgs none;
    return *CallMethod(in, v, "items", none);
  }
  if (name == "selectattr") return SelectLike(in, v, args, true, true);
  if (name == "rejectattr") return SelectLike(in, v, args, true, false);
  if (name == "select") return SelectLike(in, v, args, false, true);
  if (name == "reject") return SelectLike(in, v, args, false, false);
  if (name == "map") return Map(in, v, args);
  if (name == "attr") {
    const Value* a = Arg(args, 0, "name");
    if (!a || !a->is_string()) return in.Error("attr needs a name");
    // Attributes only: a dict's keys are items, not attributes, to jinja2's getattr.
    if (v.is_namespace()) return GetAttr(in, v, a->as_string());
    return Value::Undefined(a->as_string());
  }
  if (name == "indent") return Indent(in, v, args);
  if (name == "reverse") {
    if (v.is_string()) {  // value[::-1], a Markup for a Markup
      return Slice(in, v, Value::None(), Value::None(), Value(int64_t{-1}));
    }
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "sort") {
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    TMPL_ASSIGN_OR_RETURN(
        List sorted,
        SortValues(in, std::move(items), ArgBool(args, 0, "reverse", false),
                   ArgBool(args, 1, "case_sensitive", false), Arg(args, 2, "attribute")));
    return Value(std::move(sorted));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) return in.Error("dictsort needs a mapping");
    bool case_sensitive = ArgBool(args, 0, "case_sensitive", false);
    const Value* by = Arg(args, 1, "by");
    bool by_value = by && by->is_string() && by->as_string() == "value";
    bool reverse = ArgBool(args, 2, "reverse", false);
    List pairs;
    for (const auto& [k, x] : v.as_dict().items()) pairs.push_back(Value::Tuple(List{k, x}));
    Value index(static_cast<int64_t>(by_value ? 1 : 0));
    std::vector<std::pair<Value, Value>> keyed;
    for (Value& p : pairs)
      keyed.emplace_back(SortKey(p.as_list()[by_value ? 1 : 0], case_sensitive), p);
    absl::Status err;
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      if (!err.ok()) return false;
      auto lt = reverse ? LessThan(in, b.first, a.first) : LessThan(in, a.first, b.first);
      if (!lt.ok()) {
        err = lt.status();
        return false;
      }
      return *lt;
    });
    if (!err.ok()) return err;
    List out;
    for (auto& [k, p] : keyed) out.push_back(p);
    return Value(std::move(out));
  }
  if (name == "unique") {
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    bool case_sensitive = ArgBool(args, 0, "case_sensitive", false);
    const Value* attribute = Arg(args, 1, "attribute");
    List out, seen;
    for (const Value& item : items) {
      Value key = item;
      if (attribute && attribute->is_string()) {
        TMPL_ASSIGN_OR_RETURN(key, Attribute(in, item, attribute->as_string()));
      }
      key = SortKey(key, case_sensitive);
      bool dup = false;
      for (const Value& s : seen) {
        if (Equals(s, key)) {
          dup = true;
          break;
        }
      }
      if (!dup) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value(std::move(out));
  }
  if (name == "min" || name == "max") {
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    if (items.empty()) return Value::Undefined(name);
    bool case_sensitive = ArgBool(args, 0, "case_sensitive", false);
    const Value* attribute = Arg(args, 1, "attribute");
    size_t best = 0;
    Value best_key;
    for (size_t i = 0; i < items.size(); ++i) {
      Value key = items[i];
      if (attribute && attribute->is_string()) {
        TMPL_ASSIGN_OR_RETURN(key, Attribute(in, items[i], attribute->as_string()));
      }
      key = SortKey(key, case_sensitive);
      if (i == 0) {
        best_key = key;
        continue;
      }
      TMPL_ASSIGN_OR_RETURN(
          bool lt, name == "min" ? LessThan(in, key, best_key) : LessThan(in, best_key, key));
      if (lt) {
        best = i;
        best_key = key;
      }
    }
    return items[best];
  }
  if (name == "sum") {
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(in, v));
    const Value* attribute = Arg(args, 0, "attribute");
    const Value* start = Arg(args, 1, "start");
    Value acc = start ? *start : Value(int64_t{0});
    for (const Value& item : items) {
      Value x = item;
      if (attribute && attribute->is_string()) {
        TMPL_ASSIGN_OR_RETURN(x, Attribute(in, item, attribute->as_string()));
      }
      TMPL_ASSIGN_OR_RETURN(acc, BinaryOp(in, "+", acc, x));
    }
    return acc;
  }
  return in.Error(absl::StrCat("no filter named '", name, "'"));
}

}  // namespace tandem::chat_template
