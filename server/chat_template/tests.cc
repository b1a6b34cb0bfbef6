// jinja2's tests (`x is defined`, `x is string`, ...), with Python's type rules: a bool is
// a number, an undefined value is iterable and a sequence.
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/status_macros.h"

namespace tandem::chat_template {
namespace {

const std::set<std::string>& TestNames() {
  static const auto* names = new std::set<std::string>{
      "defined", "undefined", "none",   "boolean", "true",     "false",       "integer",
      "float",   "number",    "string", "mapping", "iterable", "sequence",    "callable",
      "sameas",  "in",        "eq",     "equalto", "==",       "ne",          "!=",
      "lt",      "lessthan",  "<",      "le",      "<=",       "gt",          "greaterthan",
      ">",       "ge",        ">=",     "odd",     "even",     "divisibleby", "lower",
      "upper",   "filter",    "test",   "escaped"};
  return *names;
}

}  // namespace

bool IsTestName(const std::string& name) { return TestNames().count(name) > 0; }

absl::StatusOr<bool> ApplyTest(Interpreter& in, const std::string& name, const Value& v,
                               CallArgs& args) {
  const Value* arg = Arg(args, 0, "value");
  auto need_arg = [&]() -> absl::Status {
    if (!arg) return in.Error(absl::StrCat("test '", name, "' needs an argument"));
    return absl::OkStatus();
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") {  // len() and [] both work; a generator has neither
    return v.is_undefined() || v.is_string() || (v.is_list() && !v.is_generator()) || v.is_dict();
  }
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return v.is_markup();  // hasattr(value, "__html__")
  if (name == "lower" || name == "upper") {
    // jinja2 tests str(value), so a dict such as {'k': 1} is lower-case.
    bool cased = false;
    for (char c : v.Str()) {
      if (c >= 'a' && c <= 'z') {
        if (name == "upper") return false;
        cased = true;
      } else if (c >= 'A' && c <= 'Z') {
        if (name == "lower") return false;
        cased = true;
      }
    }
    return cased;
  }
  if (name == "filter") return v.is_string() && IsFilterName(v.as_string());
  if (name == "test") return v.is_string() && IsTestName(v.as_string());
  if (name == "odd" || name == "even") {
    if (!v.is_number() || v.is_float()) {
      return in.Error(absl::StrCat("test '", name, "' needs an integer, got ", v.TypeName()));
    }
    int64_t r = v.as_int() % 2;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "divisibleby") {
    TMPL_RETURN_IF_ERROR(need_arg());
    if (!v.is_number() || !arg->is_number()) return in.Error("divisibleby needs numbers");
    if (v.is_float() || arg->is_float()) {
      if (arg->as_float() == 0) return in.Error("float modulo");
      return std::fmod(v.as_float(), arg->as_float()) == 0;
    }
    if (arg->as_int() == 0) return in.Error("integer division or modulo by zero");
    return v.as_int() % arg->as_int() == 0;
  }
  if (name == "sameas") {
    TMPL_RETURN_IF_ERROR(need_arg());
    // `is` identity: None, True and False are singletons; other values are not compared.
    if (v.is_none() || arg->is_none()) return v.is_none() && arg->is_none();
    if (v.is_bool() && arg->is_bool()) return v.as_bool() == arg->as_bool();
    return false;
  }
  if (name == "in") {
    TMPL_RETURN_IF_ERROR(need_arg());
    return Contains(in, *arg, v);
  }
  static const std::set<std::string> kCompare = {
      "eq", "equalto", "==", "ne",          "!=", "lt", "lessthan", "<",
      "le", "<=",      "gt", "greaterthan", ">",  "ge", ">="};
  if (kCompare.count(name)) {
    TMPL_RETURN_IF_ERROR(need_arg());
    std::string op = name;
    if (op == "eq" || op == "equalto") op = "==";
    if (op == "ne") op = "!=";
    if (op == "lt" || op == "lessthan") op = "<";
    if (op == "le") op = "<=";
    if (op == "gt" || op == "greaterthan") op = ">";
    if (op == "ge") op = ">=";
    TMPL_ASSIGN_OR_RETURN(Value r, BinaryOp(in, op, v, *arg));
    return r.Truthy();
  }
  return in.Error(absl::StrCat("no test named '", name, "'"));
}

}  // namespace tandem::chat_template
