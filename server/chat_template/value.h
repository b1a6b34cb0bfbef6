// The values a template computes with: a small dynamic type mirroring the Python objects that
// jinja2 sees when transformers renders a chat template (None, bool, int, float, str, list,
// tuple, dict in insertion order), plus the template-only kinds (undefined, macro, namespace,
// built-in function) and two flavours jinja2 produces itself: markupsafe's Markup (a str that
// escapes what is added to it) and the generators that select/reject/map return.
// Strings carry their provenance (provenance.h).
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_VALUE_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/chat_template/provenance.h"

namespace tandem::chat_template {

class Value;
struct MacroDef;  // ast.h
class Interpreter;

using List = std::vector<Value>;

class Dict;
struct CallArgs;

using Builtin = std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)>;

struct Macro {
  const MacroDef* def;
  std::string name;
  // The scope a `call` block's caller() renders in; null for macros, which see globals.
  void* closure = nullptr;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kMacro,
    kNamespace,
    kBuiltin
  };

  Value() = default;  // undefined
  static Value Undefined(std::string name = {});
  static Value None();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);  // a trusted str
  Value(const char* s) : Value(std::string(s)) {}
  Value(Text t);  // a str whose untrusted bytes t.taint names
  // markupsafe.Markup(s): printing is unchanged; `+`, `%`, format and join escape the other
  // operands (see markup.cc).
  static Value Markup(Text t);
  Value(List l);
  // A Python tuple: a list that prints as (a, b).
  static Value Tuple(List l);
  // What select/reject/selectattr/rejectattr/map return: a generator. It iterates like a
  // list but is always true, has no len() and cannot be indexed, as in jinja2.
  static Value Generator(List l);
  Value(Dict d);
  static Value MakeMacro(Macro m);
  static Value MakeNamespace(Dict d);
  static Value MakeBuiltin(std::string name, Builtin fn);
  // A str from a context; wholly untrusted when the client wrote it.
  static Value JsonString(std::string s, bool untrusted) {
    if (!untrusted) return Value(std::move(s));
    Text t;
    t.Append(s, true);
    return Value(std::move(t));
  }
  // Works for nlohmann::json and nlohmann::ordered_json; only the latter keeps object keys
  // in document order (as Python's dicts do), which tojson output depends on.
  // `untrusted`: every string in it (object keys included) came from the client.
  template <typename Json>
  static Value FromJson(const Json& j, bool untrusted = false);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's bool is an int: arithmetic and numeric tests accept it.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_generator() const { return kind_ == Kind::kList && generator_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kMacro || kind_ == Kind::kBuiltin; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return is_bool() ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return is_float() ? d_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *s_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& namespace_dict() const { return *ns_; }
  const Macro& as_macro() const { return *macro_; }
  const Builtin& as_builtin() const { return builtin_->second; }
  const std::string& builtin_name() const { return builtin_->first; }
  const std::string& undefined_name() const;

  // The untrusted byte ranges of a string (empty for other kinds).
  const Taint& taint() const;
  // Whether any text in the value is untrusted: a string's ranges, a container's elements
  // and keys. A namespace is mutable, so it (and a container holding one) always counts.
  bool Tainted() const { return tainted_; }
  // The value as a string of Text: a string's bytes and ranges; otherwise Str(), wholly
  // untrusted when Tainted().
  Text StrText() const;

  // Python truthiness.
  bool Truthy() const;
  // Python's str(): what {{ value }} prints.
  std::string Str() const;
  // Python's repr(), used inside containers.
  std::string Repr() const;
  std::string TypeName() const;
  // Bytes and elements this value expands to when printed or compared, counting shared
  // sub-lists once per reference (saturating). Containers share their elements, so a few
  // `set x = [x, x]` steps would otherwise make printing exponential.
  size_t weight() const { return weight_; }
  // Container nesting (0 for scalars); printing, comparing and serialising recurse this deep.
  size_t depth() const { return depth_; }

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  bool markup_ = false;
  bool generator_ = false;
  bool tainted_ = false;
  size_t weight_ = 1;
  size_t depth_ = 0;
  int64_t i_ = 0;
  double d_ = 0;
  // Containers are immutable once built (the sandbox forbids mutation), so copies share.
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const Taint> taint_;  // strings only; null when wholly trusted
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Dict> ns_;  // a namespace is the one mutable object
  std::shared_ptr<const Macro> macro_;
  std::shared_ptr<const std::pair<std::string, Builtin>> builtin_;
};

// A Python dict: any hashable value is a key (str, int, float, bool, None, tuples of those),
// keys equal as in Python (1, 1.0 and True are one key), insertion order kept.
class Dict {
 public:
  const Value* Find(std::string_view key) const;
  const Value* Find(const std::string& key) const { return Find(std::string_view(key)); }
  const Value* Find(const char* key) const { return Find(std::string_view(key)); }
  const Value* Find(const Value& key) const;
  void Set(Value key, Value value);
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  // Drops every entry; the moved-out entries are destroyed after the dict is consistent.
  void Clear() {
    auto old = std::move(items_);
    items_.clear();
  }

 private:
  std::vector<std::pair<Value, Value>> items_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

template <typename Json>
Value Value::FromJson(const Json& j, bool untrusted) {
  using T = typename Json::value_t;
  switch (j.type()) {
    case T::boolean:
      return Value(j.template get<bool>());
    case T::number_integer:
      return Value(j.template get<int64_t>());
    case T::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      // Beyond int64 we fall back to float rather than carry Python's big integers.
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case T::number_float:
      return Value(j.template get<double>());
    case T::string:
      return JsonString(j.template get<std::string>(), untrusted);
    case T::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(FromJson(e, untrusted));
      return Value(std::move(l));
    }
    case T::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.Set(JsonString(it.key(), untrusted), FromJson(it.value(), untrusted));
      }
      return Value(std::move(d));
    }
    default:
      return None();
  }
}

// Python's ==, including 1 == 1.0 == True and element-wise containers.
bool Equals(const Value& a, const Value& b);
// Whether Python could use the value as a dict key (lists, dicts and namespaces cannot).
bool Hashable(const Value& v);
// Python's float repr (shortest round-trip, exponent beyond 1e16 / below 1e-4).
std::string FormatFloat(double d);
std::string ReprString(const std::string& s);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_VALUE_H_
