// Python's operators, iteration and subscription over template values.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/format.h"
#include "server/chat_template/markup.h"
#include "server/chat_template/status_macros.h"
#include "server/chat_template/text.h"

namespace tandem::chat_template {
namespace {

absl::Status TypeError(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    return in.Error(absl::StrCat("'", u.undefined_name().empty() ? "value" : u.undefined_name(),
                                 "' is undefined"));
  }
  return in.Error(absl::StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(),
                               "' and '", b.TypeName(), "'"));
}

double FloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

absl::StatusOr<Value> Repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
  if (unit && static_cast<uint64_t>(n) > in.limits().max_output_bytes / unit) {
    return in.Error("repetition result is too large");
  }
  TMPL_RETURN_IF_ERROR(in.Charge(unit * n));
  if (seq.is_string()) {
    const Text unit_text = seq.StrText();
    Text out;
    for (int64_t i = 0; i < n; ++i) out.Append(unit_text);
    return seq.is_markup() ? Value::Markup(std::move(out)) : Value(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out));
}

absl::StatusOr<Value> Arith(Interpreter& in, const std::string& op, const Value& a,
                            const Value& b) {
  bool both_int = !a.is_float() && !b.is_float();
  int64_t x = a.as_int(), y = b.as_int(), r = 0;
  double fx = a.as_float(), fy = b.as_float();
  if (op == "+") {
    if (both_int) {
      if (__builtin_add_overflow(x, y, &r)) return in.Error("integer overflow");
      return Value(r);
    }
    return Value(fx + fy);
  }
  if (op == "-") {
    if (both_int) {
      if (__builtin_sub_overflow(x, y, &r)) return in.Error("integer overflow");
      return Value(r);
    }
    return Value(fx - fy);
  }
  if (op == "*") {
    if (both_int) {
      if (__builtin_mul_overflow(x, y, &r)) return in.Error("integer overflow");
      return Value(r);
    }
    return Value(fx * fy);
  }
  if (op == "/") {
    if (fy == 0) return in.Error("division by zero");
    return Value(fx / fy);
  }
  if (op == "//") {
    if (both_int) {
      if (y == 0) return in.Error("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return in.Error("integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value(q);
    }
    if (fy == 0) return in.Error("float floor division by zero");
    return Value(std::floor(fx / fy));
  }
  if (op == "%") {
    if (both_int) {
      if (y == 0) return in.Error("integer division or modulo by zero");
      if (y == -1) return Value(int64_t{0});
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    if (fy == 0) return in.Error("float modulo");
    return Value(FloorMod(fx, fy));
  }
  if (op == "**") {
    if (both_int && y >= 0) {
      int64_t acc = 1, base = x;
      for (int64_t e = y; e > 0; e >>= 1) {
        if (e & 1) {
          if (__builtin_mul_overflow(acc, base, &acc)) return in.Error("integer overflow");
        }
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
          return in.Error("integer overflow");
        }
      }
      return Value(acc);
    }
    if (fx == 0 && fy < 0) return in.Error("0.0 cannot be raised to a negative power");
    return Value(std::pow(fx, fy));
  }
  return in.Error(absl::StrCat("unknown operator ", op));
}

}  // namespace

const Value* Arg(const CallArgs& args, size_t i, const char* name) {
  if (i < args.positional.size()) return &args.positional[i];
  for (const auto& [k, v] : args.keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

absl::StatusOr<List> Iterate(Interpreter& in, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return List{};
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [k, _] : v.as_dict().items()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      // Iterating a Markup yields plain str characters, as str.__iter__ does.
      const Text text = v.StrText();
      std::vector<size_t> offsets;
      DecodeUtf8(text.text, &offsets);
      List chars;
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        Text c;
        c.AppendSlice(text, offsets[i], offsets[i + 1]);
        chars.emplace_back(std::move(c));
      }
      return chars;
    }
    default:
      return in.Error(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

absl::StatusOr<bool> LessThan(Interpreter& in, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps order
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return LessThan(in, x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return TypeError(in, "<", a, b);
}

absl::StatusOr<bool> Contains(Interpreter& in, const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return in.Error(
            absl::StrCat("'in <string>' requires string as left operand, not ", item.TypeName()));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!Hashable(item)) {
        return in.Error(absl::StrCat("unhashable type: '", item.TypeName(), "'"));
      }
      return container.as_dict().Find(item) != nullptr;
    case Value::Kind::kNamespace:
      return item.is_string() && container.namespace_dict().Find(item.as_string()) != nullptr;
    default:
      return in.Error(
          absl::StrCat("argument of type '", container.TypeName(), "' is not iterable"));
  }
}

absl::StatusOr<Value> BinaryOp(Interpreter& in, const std::string& op, const Value& a,
                               const Value& b) {
  if (op == "==") return Value(Equals(a, b));
  if (op == "!=") return Value(!Equals(a, b));
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    if (op == "<") {
      auto lt = LessThan(in, a, b);
      if (!lt.ok()) return TypeError(in, op, a, b);
      return Value(*lt);
    }
    bool swap = op == ">" || op == "<=";
    auto lt = swap ? LessThan(in, b, a) : LessThan(in, a, b);
    if (!lt.ok()) return TypeError(in, op, a, b);
    // a > b == b < a; a <= b == !(b < a); a >= b == !(a < b)
    return Value(op == ">" ? *lt : !*lt);
  }
  if (op == "in" || op == "notin") {
    TMPL_ASSIGN_OR_RETURN(bool c, Contains(in, b, a));
    return Value(op == "in" ? c : !c);
  }
  if (op == "~") {
    // jinja2 joins str() of both sides into a plain str, Markup or not (autoescape off).
    Text s = a.StrText();
    s.Append(b.StrText());
    TMPL_RETURN_IF_ERROR(in.Charge(s.text.size()));
    return Value(std::move(s));
  }
  if (a.is_number() && b.is_number()) return Arith(in, op, a, b);
  if (op == "%" && a.is_string()) return PercentFormat(in, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      TMPL_RETURN_IF_ERROR(in.Charge(a.as_string().size() + b.as_string().size()));
      if (a.is_markup() || b.is_markup()) return MarkupConcat(a, b);
      Text s = a.StrText();
      s.Append(b.StrText());
      return Value(std::move(s));
    }
    if (a.is_list() && b.is_list()) {
      TMPL_RETURN_IF_ERROR(in.Charge(a.as_list().size() + b.as_list().size()));
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && b.is_number() && !b.is_float()) {
      return Repeat(in, a, b.as_int());
    }
    if ((b.is_string() || b.is_list()) && a.is_number() && !a.is_float()) {
      return Repeat(in, b, a.as_int());
    }
  }
  return TypeError(in, op, a, b);
}

namespace {

// Python's slice.indices(): clamps start/stop for the given step.
absl::Status SliceIndices(Interpreter& in, int64_t len, const Value& start, const Value& stop,
                          const Value& step, int64_t& b, int64_t& e, int64_t& st) {
  for (const Value* v : {&start, &stop, &step}) {
    if (!v->is_none() && !(v->is_number() && !v->is_float())) {
      return in.Error("slice indices must be integers or None");
    }
  }
  st = step.is_none() ? 1 : step.as_int();
  if (st == 0) return in.Error("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t def_pos, int64_t def_neg) {
    if (v.is_none()) return st > 0 ? def_pos : def_neg;
    int64_t x = v.as_int();
    if (x < 0) {
      x += len;
      if (x < 0) x = st > 0 ? 0 : -1;
    } else if (x >= len) {
      x = st > 0 ? len : len - 1;
    }
    return x;
  };
  b = clamp(start, 0, len - 1);
  e = clamp(stop, len, -1);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Value> Slice(Interpreter& in, const Value& obj, const Value& start,
                            const Value& stop, const Value& step) {
  if (obj.is_undefined()) {
    return in.Error(absl::StrCat("'", obj.undefined_name(), "' is undefined"));
  }
  if ((!obj.is_string() && !obj.is_list()) || obj.is_generator()) {
    return in.Error(absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
  }
  std::vector<size_t> offsets;
  if (obj.is_string()) DecodeUtf8(obj.as_string(), &offsets);
  int64_t len = obj.is_string() ? static_cast<int64_t>(offsets.size()) - 1
                                : static_cast<int64_t>(obj.as_list().size());
  int64_t b = 0, e = 0, st = 1;
  TMPL_RETURN_IF_ERROR(SliceIndices(in, len, start, stop, step, b, e, st));
  if (obj.is_string()) {
    const Text text = obj.StrText();
    Text out;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
      out.AppendSlice(text, offsets[i], offsets[i + 1]);
    }
    TMPL_RETURN_IF_ERROR(in.Charge(out.text.size()));
    // Markup.__getitem__ returns a Markup.
    return obj.is_markup() ? Value::Markup(std::move(out)) : Value(std::move(out));
  }
  List sl;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) sl.push_back(obj.as_list()[i]);
  TMPL_RETURN_IF_ERROR(in.Charge(sl.size()));
  if (obj.is_tuple()) return Value::Tuple(std::move(sl));
  return Value(std::move(sl));
}

absl::StatusOr<Value> GetItem(Interpreter& in, const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return in.Error(absl::StrCat("'", obj.undefined_name(), "' is undefined"));
    case Value::Kind::kDict:
      // An unhashable key raises TypeError, which jinja2's getitem turns into undefined.
      if (Hashable(key)) {
        if (const Value* v = obj.as_dict().Find(key)) return *v;
      }
      return Value::Undefined(key.Str());
    case Value::Kind::kNamespace:
      if (key.is_string()) {
        if (const Value* v = obj.namespace_dict().Find(key.as_string())) return *v;
      }
      return Value::Undefined(key.Str());
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (obj.is_generator()) return Value::Undefined(key.Str());  // not subscriptable
      if (!key.is_number() || key.is_float()) {
        if (key.is_string()) return Value::Undefined(key.as_string());
        return in.Error(absl::StrCat(obj.TypeName(), " indices must be integers"));
      }
      int64_t i = key.as_int();
      if (obj.is_list()) {
        int64_t n = static_cast<int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::Undefined("index");
        return obj.as_list()[i];
      }
      std::vector<size_t> offsets;
      DecodeUtf8(obj.as_string(), &offsets);
      int64_t n = static_cast<int64_t>(offsets.size()) - 1;
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("index");
      Text c;
      c.AppendSlice(obj.StrText(), offsets[i], offsets[i + 1]);
      return obj.is_markup() ? Value::Markup(std::move(c)) : Value(std::move(c));
    }
    default:
      return Value::Undefined(key.Str());
  }
}

absl::StatusOr<Value> GetAttr(Interpreter& in, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) {
    return in.Error(absl::StrCat("'", obj.undefined_name(), "' is undefined"));
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().Find(name)) return *v;
  } else if (obj.is_namespace()) {
    if (const Value* v = obj.namespace_dict().Find(name)) return *v;
  }
  return Value::Undefined(name);
}

}  // namespace tandem::chat_template
