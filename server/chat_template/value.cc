#include "server/chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace tandem::chat_template {

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::Find(const Value& key) const {
  if (key.is_string()) return Find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items_) {
    if (!k.is_string() && Equals(k, key)) return &v;
  }
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  for (auto& [k, v] : items_) {
    if (k.is_string() == key.is_string() && Equals(k, key)) {
      v = std::move(value);  // Python keeps the first key object, as here
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

const std::string& Value::undefined_name() const {
  static const std::string kEmpty;
  return s_ ? *s_ : kEmpty;
}

Value Value::Undefined(std::string name) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), d_(d) {}
namespace {
size_t SaturatingAdd(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
}  // namespace

Value::Value(std::string s)
    : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {
  weight_ = 1 + s_->size();
}
Value::Value(Text t) : Value(std::move(t.text)) {
  if (!t.taint.empty()) {
    taint_ = std::make_shared<const Taint>(std::move(t.taint));
    tainted_ = true;
  }
}
Value Value::Markup(Text t) {
  Value v(std::move(t));
  v.markup_ = true;
  return v;
}
Value::Value(List l) : kind_(Kind::kList), list_(std::make_shared<const List>(std::move(l))) {
  for (const Value& v : *list_) {
    weight_ = SaturatingAdd(weight_, v.weight_);
    depth_ = std::max(depth_, v.depth_ + 1);
    tainted_ = tainted_ || v.tainted_;
  }
  depth_ = std::max<size_t>(depth_, 1);
}
Value::Value(Dict d) : kind_(Kind::kDict), dict_(std::make_shared<const Dict>(std::move(d))) {
  for (const auto& [k, v] : dict_->items()) {
    weight_ = SaturatingAdd(weight_, SaturatingAdd(k.weight_, v.weight_));
    depth_ = std::max(depth_, v.depth_ + 1);
    tainted_ = tainted_ || k.tainted_ || v.tainted_;
  }
  depth_ = std::max<size_t>(depth_, 1);
}

Value Value::Tuple(List l) {
  Value v(std::move(l));
  v.tuple_ = true;
  return v;
}

Value Value::Generator(List l) {
  Value v(std::move(l));
  v.generator_ = true;
  return v;
}

const Taint& Value::taint() const {
  static const Taint kNone;
  return taint_ ? *taint_ : kNone;
}

Text Value::StrText() const {
  if (is_string()) return Text{*s_, taint()};
  Text t;
  t.Append(Str(), tainted_);
  return t;
}

Value Value::MakeMacro(Macro m) {
  Value v;
  v.kind_ = Kind::kMacro;
  v.macro_ = std::make_shared<const Macro>(std::move(m));
  return v;
}
Value Value::MakeNamespace(Dict d) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ns_ = std::make_shared<Dict>(std::move(d));
  // Its attributes change after it is built, so it cannot vouch for its contents.
  v.tainted_ = true;
  return v;
}
Value Value::MakeBuiltin(std::string name, Builtin fn) {
  Value v;
  v.kind_ = Kind::kBuiltin;
  v.builtin_ =
      std::make_shared<const std::pair<std::string, Builtin>>(std::move(name), std::move(fn));
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return d_ != 0;
    case Kind::kString:
      return !s_->empty();
    case Kind::kList:
      return generator_ || !list_->empty();
    case Kind::kDict:
      return dict_->size() != 0;
    default:
      return true;
  }
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  int decpt = exp + 1;  // value = 0.DIGITS * 10^decpt
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= static_cast<int>(digits.size())) {
      out = digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return sign + out;
}

std::string ReprString(const std::string& s) {
  char quote = '\'';
  if (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) quote = '"';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *s_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return FormatFloat(d_);
    case Kind::kString:
      return markup_ ? "Markup(" + ReprString(*s_) + ")" : ReprString(*s_);
    case Kind::kList: {
      // A generator prints as its object; its address is not reproducible, so none is shown.
      if (generator_) return "<generator object>";
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items()) {
        if (!first) out += ", ";
        first = false;
        out += k.Repr() + ": " + v.Repr();
      }
      return out + "}";
    }
    case Kind::kNamespace: {
      // A namespace is mutable and can contain itself; nested ones print shallowly.
      static thread_local int depth = 0;
      if (depth > 0) return "<Namespace {...}>";
      struct Guard {
        Guard() { ++depth; }
        ~Guard() { --depth; }
      } guard;
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, v] : ns_->items()) {
        if (!first) out += ", ";
        first = false;
        out += k.Repr() + ": " + v.Repr();
      }
      return out + "}>";
    }
    case Kind::kMacro:
      return "<Macro '" + macro_->name + "'>";
    case Kind::kBuiltin:
      return "<built-in function " + builtin_->first + ">";
  }
  return "";
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return markup_ ? "Markup" : "str";
    case Kind::kList:
      return generator_ ? "generator" : tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kMacro:
      return "Macro";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kBuiltin:
      return "builtin_function_or_method";
  }
  return "object";
}

bool Equals(const Value& a, const Value& b) {
  // A generator equals only itself.
  if (a.is_generator() || b.is_generator()) {
    return a.is_list() && b.is_list() && &a.as_list() == &b.as_list();
  }
  if (a.is_list() && b.is_list() && &a.as_list() == &b.as_list()) return true;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* o = y.Find(k);
        if (!o || !Equals(v, *o)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.namespace_dict() == &b.namespace_dict();
    default:
      return false;
  }
}

bool Hashable(const Value& v) {
  if (v.is_tuple()) {
    for (const Value& e : v.as_list()) {
      if (!Hashable(e)) return false;
    }
    return true;
  }
  return !v.is_list() && !v.is_dict() && !v.is_namespace();
}

}  // namespace tandem::chat_template
