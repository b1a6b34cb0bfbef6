#include "server/chat_template/interpreter.h"

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"
#include "server/chat_template/status_macros.h"

namespace tandem::chat_template {

Interpreter::Interpreter(const RenderLimits& limits, Dict globals) : limits_(limits) {
  root_.parent = nullptr;
  Dict builtins;
  AddGlobals(builtins);
  for (const auto& [k, v] : builtins.items()) root_.vars[k.as_string()] = v;
  // Render-time variables shadow the built-in globals, as in jinja2.
  for (const auto& [k, v] : globals.items()) root_.vars[k.as_string()] = v;
}

Interpreter::~Interpreter() {
  for (Value& ns : namespaces_) ns.namespace_dict().Clear();
}

absl::Status Interpreter::Error(const std::string& message) const {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template error at line ", line_, ": ", message));
}

absl::Status Interpreter::Charge(size_t units) {
  work_ += units;
  if (work_ > limits_.max_work) {
    return Error(absl::StrCat("rendering exceeds the work limit (", limits_.max_work,
                              " bytes or elements built)"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckWeight(const Value& v) const {
  if (v.depth() > static_cast<size_t>(limits_.max_nesting_depth)) {
    return Error(
        absl::StrCat("lists and dicts nested deeper than ", limits_.max_nesting_depth, " levels"));
  }
  if (v.weight() > limits_.max_output_bytes) {
    return Error(absl::StrCat("value too large (expands to more than ", limits_.max_output_bytes,
                              " bytes or elements)"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Append(Text& out, const Text& text) {
  if (out.text.size() + text.text.size() > limits_.max_output_bytes) {
    return Error(absl::StrCat("output exceeds ", limits_.max_output_bytes, " bytes"));
  }
  TMPL_RETURN_IF_ERROR(Charge(text.text.size()));
  out.Append(text);
  return absl::OkStatus();
}

absl::StatusOr<Text> Interpreter::Render(const Body& body) {
  Text out;
  TMPL_ASSIGN_OR_RETURN(Flow f, Exec(body, root_, out));
  (void)f;
  return out;
}

Value Interpreter::Lookup(const std::string& name, Scope& scope) const {
  for (const Scope* s = &scope; s; s = s->parent) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::Undefined(name);
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Body& body, Scope& scope, Text& out) {
  for (const StmtPtr& s : body) {
    TMPL_ASSIGN_OR_RETURN(Flow f, ExecStmt(*s, scope, out));
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

namespace {
struct NestingGuard {
  explicit NestingGuard(int& n) : n(n) { ++n; }
  ~NestingGuard() { --n; }
  int& n;
};
}  // namespace

absl::StatusOr<Interpreter::Flow> Interpreter::ExecStmt(const Stmt& s, Scope& scope, Text& out) {
  NestingGuard guard(nesting_);
  if (nesting_ > limits_.max_nesting_depth) {
    return Error(
        absl::StrCat("evaluation nested deeper than ", limits_.max_nesting_depth, " levels"));
  }
  return ExecNode(s, scope, out);
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecNode(const Stmt& s, Scope& scope, Text& out) {
  if (s.line) line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::kText:
      TMPL_RETURN_IF_ERROR(Append(out, Text{s.text, {}}));
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      TMPL_RETURN_IF_ERROR(Append(out, v.StrText()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        TMPL_ASSIGN_OR_RETURN(Value c, Eval(*s.conditions[i], scope));
        if (c.Truthy()) return Exec(s.bodies[i], scope, out);
      }
      if (s.bodies.size() > s.conditions.size()) return Exec(s.bodies.back(), scope, out);
      return Flow::kNormal;
    case Stmt::Kind::kFor:
      return ExecFor(s, scope, out);
    case Stmt::Kind::kSet:
      TMPL_RETURN_IF_ERROR(ExecSet(s, scope));
      return Flow::kNormal;
    case Stmt::Kind::kSetBlock:
    case Stmt::Kind::kFilterBlock: {
      Text captured;
      TMPL_ASSIGN_OR_RETURN(Flow f, Exec(s.bodies[0], scope, captured));
      (void)f;
      Value v(std::move(captured));
      if (s.filter) {
        // Apply the chain innermost first; its innermost argument is the captured text.
        std::vector<const Expr*> chain;
        for (const Expr* e = s.filter.get(); e; e = e->args[0].get()) chain.push_back(e);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          CallArgs args;
          TMPL_RETURN_IF_ERROR(EvalArgs(**it, 1, scope, args));
          TMPL_ASSIGN_OR_RETURN(v, Filter((*it)->name, v, args));
        }
      }
      if (s.kind == Stmt::Kind::kSetBlock) {
        scope.vars[s.targets[0]] = std::move(v);
      } else {
        TMPL_RETURN_IF_ERROR(Append(out, v.StrText()));
      }
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      scope.vars[s.macro->name] = Value::MakeMacro(Macro{s.macro.get(), s.macro->name, nullptr});
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      const Expr& call = *s.expr;
      TMPL_ASSIGN_OR_RETURN(Value callee, Eval(*call.args[0], scope));
      if (callee.kind() != Value::Kind::kMacro) return Error("'call' block needs a macro");
      CallArgs args;
      TMPL_RETURN_IF_ERROR(EvalArgs(call, 1, scope, args));
      Value caller = Value::MakeMacro(Macro{s.macro.get(), "caller", &scope});
      TMPL_ASSIGN_OR_RETURN(Value v, CallMacro(callee, args, caller));
      TMPL_RETURN_IF_ERROR(Append(out, v.StrText()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kScope:
      return Exec(s.bodies[0], scope, out);
    case Stmt::Kind::kWith: {
      Scope inner{&scope, {}};
      for (size_t i = 0; i < s.targets.size(); ++i) {
        TMPL_ASSIGN_OR_RETURN(Value v, Eval(*s.conditions[i], scope));
        inner.vars[s.targets[i]] = std::move(v);
      }
      return Exec(s.bodies[0], inner, out);
    }
  }
  return Flow::kNormal;
}

absl::Status Interpreter::ExecSet(const Stmt& s, Scope& scope) {
  TMPL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
  if (!s.target_attr.empty()) {
    Value ns = Lookup(s.targets[0], scope);
    if (!ns.is_namespace()) {
      return Error(
          absl::StrCat("cannot assign attribute on non-namespace object '", s.targets[0], "'"));
    }
    ns.namespace_dict().Set(s.target_attr, std::move(v));
    return absl::OkStatus();
  }
  if (s.targets.size() == 1) {
    scope.vars[s.targets[0]] = std::move(v);
    return absl::OkStatus();
  }
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(*this, v));
  if (items.size() != s.targets.size()) {
    return Error(
        absl::StrCat("cannot unpack ", items.size(), " values into ", s.targets.size(), " names"));
  }
  for (size_t i = 0; i < items.size(); ++i) scope.vars[s.targets[i]] = items[i];
  return absl::OkStatus();
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Stmt& s, Scope& scope, Text& out) {
  TMPL_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr, scope));
  if (seq.is_none() || seq.is_number() || seq.is_callable()) {
    return Error(absl::StrCat("'", seq.TypeName(), "' object is not iterable"));
  }
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(*this, seq));
  Scope loop_scope{&scope, {}};
  auto bind = [&](const Value& item) -> absl::Status {
    if (s.targets.size() == 1) {
      loop_scope.vars[s.targets[0]] = item;
      return absl::OkStatus();
    }
    TMPL_ASSIGN_OR_RETURN(List parts, Iterate(*this, item));
    if (parts.size() != s.targets.size()) {
      return Error(absl::StrCat("cannot unpack ", parts.size(), " values into ", s.targets.size(),
                                " loop variables"));
    }
    for (size_t i = 0; i < parts.size(); ++i) loop_scope.vars[s.targets[i]] = parts[i];
    return absl::OkStatus();
  };
  if (s.cond) {
    List kept;
    for (const Value& item : items) {
      TMPL_RETURN_IF_ERROR(bind(item));
      TMPL_ASSIGN_OR_RETURN(Value c, Eval(*s.cond, loop_scope));
      if (c.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (s.bodies.size() > 1) return Exec(s.bodies[1], scope, out);
    return Flow::kNormal;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      return Error(absl::StrCat("more than ", limits_.max_loop_iterations,
                                " loop iterations and macro calls"));
    }
    // Each iteration starts from a fresh scope: jinja2 reads a variable the body assigns from
    // the enclosing scope until the assignment, in every iteration.
    loop_scope.vars.clear();
    TMPL_RETURN_IF_ERROR(bind(items[i]));
    Dict loop;
    loop.Set("index", Value(i + 1));
    loop.Set("index0", Value(i));
    loop.Set("revindex", Value(n - i));
    loop.Set("revindex0", Value(n - i - 1));
    loop.Set("first", Value(i == 0));
    loop.Set("last", Value(i == n - 1));
    loop.Set("length", Value(n));
    loop.Set("depth", Value(int64_t{1}));
    loop.Set("depth0", Value(int64_t{0}));
    loop.Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("previtem"));
    loop.Set("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("nextitem"));
    loop.Set("cycle", Value::MakeBuiltin(
                          "cycle", [i](Interpreter& in, CallArgs& a) -> absl::StatusOr<Value> {
                            if (a.positional.empty())
                              return in.Error("loop.cycle() needs an argument");
                            return a.positional[i % a.positional.size()];
                          }));
    loop_scope.vars["loop"] = Value(std::move(loop));
    TMPL_ASSIGN_OR_RETURN(Flow f, Exec(s.bodies[0], loop_scope, out));
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

absl::Status Interpreter::EvalArgs(const Expr& e, size_t first, Scope& scope, CallArgs& args) {
  for (size_t i = first; i < e.args.size(); ++i) {
    TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [k, ex] : e.kwargs) {
    TMPL_ASSIGN_OR_RETURN(Value v, Eval(*ex, scope));
    if (k == kStarArgs) {  // f(*items): the items follow the positional arguments
      // An undefined value iterates as empty, as jinja2's Undefined does.
      if (v.is_none() || v.is_number() || v.is_callable()) {
        return Error(absl::StrCat("argument after * must be an iterable, not ", v.TypeName()));
      }
      TMPL_ASSIGN_OR_RETURN(List items, Iterate(*this, v));
      for (Value& item : items) args.positional.push_back(std::move(item));
    } else if (k == kStarKwargs) {  // f(**mapping)
      if (!v.is_dict()) {
        return Error(absl::StrCat("argument after ** must be a mapping, not ", v.TypeName()));
      }
      for (const auto& [key, x] : v.as_dict().items()) {
        if (!key.is_string()) return Error("keywords must be strings");
        args.keyword.emplace_back(key.as_string(), x);
      }
    } else {
      args.keyword.emplace_back(k, std::move(v));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& e, Scope& scope) {
  NestingGuard guard(nesting_);
  if (nesting_ > limits_.max_nesting_depth) {
    return Error(
        absl::StrCat("evaluation nested deeper than ", limits_.max_nesting_depth, " levels"));
  }
  // Every value an expression yields passes the size and nesting check, whichever filter,
  // method or global built it.
  absl::StatusOr<Value> v = EvalNode(e, scope);
  if (v.ok()) TMPL_RETURN_IF_ERROR(CheckWeight(*v));
  return v;
}

absl::StatusOr<Value> Interpreter::EvalNode(const Expr& e, Scope& scope) {
  if (e.line) line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return Lookup(e.name, scope);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      for (const ExprPtr& a : e.args) {
        TMPL_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
        items.push_back(std::move(v));
      }
      TMPL_RETURN_IF_ERROR(Charge(items.size()));
      Value v =
          e.kind == Expr::Kind::kTuple ? Value::Tuple(std::move(items)) : Value(std::move(items));
      TMPL_RETURN_IF_ERROR(CheckWeight(v));
      return v;
    }
    case Expr::Kind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        TMPL_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], scope));
        TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], scope));
        // Python evaluates the key and the value before hashing the key.
        if (!Hashable(k)) return Error(absl::StrCat("unhashable type: '", k.TypeName(), "'"));
        d.Set(std::move(k), std::move(v));
      }
      TMPL_RETURN_IF_ERROR(Charge(d.size()));
      Value v(std::move(d));
      TMPL_RETURN_IF_ERROR(CheckWeight(v));
      return v;
    }
    case Expr::Kind::kGetAttr: {
      TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      return GetAttr(*this, obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      TMPL_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], scope));
      return GetItem(*this, obj, key);
    }
    case Expr::Kind::kSlice: {
      TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      Value parts[3] = {Value::None(), Value::None(), Value::None()};
      for (int i = 0; i < 3; ++i) {
        if (e.args[i + 1]) {
          TMPL_ASSIGN_OR_RETURN(parts[i], Eval(*e.args[i + 1], scope));
        }
      }
      return Slice(*this, obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall:
      return EvalCall(e, scope);
    case Expr::Kind::kFilter: {
      TMPL_ASSIGN_OR_RETURN(Value input, Eval(*e.args[0], scope));
      CallArgs args;
      TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
      line_ = e.line;
      return Filter(e.name, input, args);
    }
    case Expr::Kind::kTest: {
      TMPL_ASSIGN_OR_RETURN(Value input, Eval(*e.args[0], scope));
      CallArgs args;
      TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
      line_ = e.line;
      TMPL_ASSIGN_OR_RETURN(bool r, Test(e.name, input, args));
      return Value(r != e.negated);
    }
    case Expr::Kind::kNot: {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      return Value(!v.Truthy());
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      line_ = e.line;
      if (!v.is_number()) {
        return Error(absl::StrCat("bad operand type for unary ",
                                  e.kind == Expr::Kind::kNeg ? "-" : "+", ": '", v.TypeName(),
                                  "'"));
      }
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == INT64_MIN) return Error("integer overflow");
      return Value(-v.as_int());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e, scope);
    case Expr::Kind::kCompareChain: {
      // a < b < c is (a < b) and (b < c), with b evaluated once.
      TMPL_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], scope));
      Value result(true);
      for (const auto& [op, expr] : e.kwargs) {
        TMPL_ASSIGN_OR_RETURN(Value right, Eval(*expr, scope));
        line_ = e.line;
        TMPL_ASSIGN_OR_RETURN(result, BinaryOp(*this, op, left, right));
        if (!result.Truthy()) return result;
        left = std::move(right);
      }
      return result;
    }
    case Expr::Kind::kConditional: {
      TMPL_ASSIGN_OR_RETURN(Value c, Eval(*e.args[0], scope));
      if (c.Truthy()) return Eval(*e.args[1], scope);
      if (e.args[2]) return Eval(*e.args[2], scope);
      return Value::Undefined();
    }
  }
  return Error("unknown expression");
}

absl::StatusOr<Value> Interpreter::EvalBinary(const Expr& e, Scope& scope) {
  TMPL_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0], scope));
  if (e.name == "and") {
    if (!l.Truthy()) return l;
    return Eval(*e.args[1], scope);
  }
  if (e.name == "or") {
    if (l.Truthy()) return l;
    return Eval(*e.args[1], scope);
  }
  TMPL_ASSIGN_OR_RETURN(Value r, Eval(*e.args[1], scope));
  line_ = e.line;
  TMPL_ASSIGN_OR_RETURN(Value v, BinaryOp(*this, e.name, l, r));
  TMPL_RETURN_IF_ERROR(CheckWeight(v));
  return v;
}

absl::StatusOr<Value> Interpreter::EvalCall(const Expr& e, Scope& scope) {
  const Expr& callee = *e.args[0];
  CallArgs args;
  if (callee.kind == Expr::Kind::kGetAttr) {
    TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*callee.args[0], scope));
    TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
    line_ = e.line;
    if (obj.is_string() || obj.is_dict() || obj.is_list()) {
      auto r = CallMethod(*this, obj, callee.name, args);
      if (r.has_value()) {
        if (!r->ok() || MethodKeepsProvenance(callee.name)) return std::move(*r);
        return Untrusted(**std::move(r), obj, args);
      }
    }
    TMPL_ASSIGN_OR_RETURN(Value fn, GetAttr(*this, obj, callee.name));
    if (!fn.is_callable()) {
      if (obj.is_string() || obj.is_dict() || obj.is_list()) {
        return Error(absl::StrCat("'", obj.TypeName(), "' object has no method '", callee.name,
                                  "' (or it is not available in the sandbox)"));
      }
      return Error(absl::StrCat("'", callee.name, "' is not callable"));
    }
    return Call(fn, args);
  }
  TMPL_ASSIGN_OR_RETURN(Value fn, Eval(callee, scope));
  TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
  line_ = e.line;
  if (fn.is_undefined()) {
    return Error(absl::StrCat("'", fn.undefined_name(), "' is undefined"));
  }
  return Call(fn, args);
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.kind() == Value::Kind::kBuiltin) {
    TMPL_ASSIGN_OR_RETURN(Value v, callee.as_builtin()(*this, args));
    return Untrusted(std::move(v), Value(), args);
  }
  if (callee.kind() == Value::Kind::kMacro) return CallMacro(callee, args, Value::Undefined());
  return Error(absl::StrCat("'", callee.TypeName(), "' object is not callable"));
}

absl::StatusOr<Value> Interpreter::CallMacro(const Value& macro_value, CallArgs& args,
                                             Value caller) {
  const Macro& m = macro_value.as_macro();
  const MacroDef& def = *m.def;
  if (++iterations_ > limits_.max_loop_iterations) {
    return Error(absl::StrCat("more than ", limits_.max_loop_iterations,
                              " loop iterations and macro calls"));
  }
  if (call_depth_ >= limits_.max_call_depth) {
    return Error(absl::StrCat("macro calls nested deeper than ", limits_.max_call_depth));
  }
  if (args.positional.size() > def.params.size()) {
    return Error(absl::StrCat("macro '", m.name, "' takes not more than ", def.params.size(),
                              " argument(s)"));
  }
  Scope local{m.closure ? static_cast<Scope*>(m.closure) : &root_, {}};
  std::vector<bool> bound(def.params.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    local.vars[def.params[i].first] = args.positional[i];
    bound[i] = true;
  }
  for (auto& [k, v] : args.keyword) {
    size_t i = 0;
    while (i < def.params.size() && def.params[i].first != k) ++i;
    if (i == def.params.size()) {
      return Error(absl::StrCat("macro '", m.name, "' takes no keyword argument '", k, "'"));
    }
    if (bound[i]) {
      return Error(absl::StrCat("macro '", m.name, "' got multiple values for argument '", k, "'"));
    }
    local.vars[k] = v;
    bound[i] = true;
  }
  // Missing arguments without defaults are undefined, as in jinja2.
  for (size_t i = 0; i < def.params.size(); ++i) {
    if (bound[i]) continue;
    if (def.params[i].second) {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*def.params[i].second, local));
      local.vars[def.params[i].first] = std::move(v);
    } else {
      local.vars[def.params[i].first] = Value::Undefined(def.params[i].first);
    }
  }
  if (!caller.is_undefined()) local.vars["caller"] = caller;
  ++call_depth_;
  Text out;
  int saved_line = line_;
  auto f = Exec(def.body, local, out);
  --call_depth_;
  line_ = saved_line;
  if (!f.ok()) return f.status();
  return Value(std::move(out));
}

namespace {

bool AnyTainted(const Value& input, const CallArgs& args) {
  if (input.Tainted()) return true;
  for (const Value& v : args.positional) {
    if (v.Tainted()) return true;
  }
  for (const auto& [k, v] : args.keyword) {
    if (v.Tainted()) return true;
  }
  return false;
}

}  // namespace

Value Interpreter::Untrusted(Value result, const Value& input, const CallArgs& args) {
  if (!result.is_string() || result.Tainted() || !AnyTainted(input, args)) return result;
  Text t;
  t.Append(result.as_string(), true);
  return result.is_markup() ? Value::Markup(std::move(t)) : Value(std::move(t));
}

absl::StatusOr<Value> Interpreter::Filter(const std::string& name, const Value& input,
                                          CallArgs& args) {
  TMPL_ASSIGN_OR_RETURN(Value v, ApplyFilter(*this, name, input, args));
  if (FilterKeepsProvenance(name)) return v;
  return Untrusted(std::move(v), input, args);
}

absl::StatusOr<bool> Interpreter::Test(const std::string& name, const Value& input,
                                       CallArgs& args) {
  return ApplyTest(*this, name, input, args);
}

}  // namespace tandem::chat_template
