// Executes a parsed template against a context, with jinja2's semantics for scoping (for
// loops and macros open scopes, `if` does not), undefined values and Python operators.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_INTERPRETER_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_INTERPRETER_H_

#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "server/chat_template/ast.h"
#include "server/chat_template/limits.h"
#include "server/chat_template/value.h"

namespace tandem::chat_template {

class Interpreter {
 public:
  Interpreter(const RenderLimits& limits, Dict globals);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // The output and which of its bytes came from untrusted values.
  absl::StatusOr<Text> Render(const Body& body);

  // Entry points shared with filters, tests and methods.
  absl::StatusOr<Value> Call(const Value& callee, CallArgs& args);
  absl::StatusOr<Value> Filter(const std::string& name, const Value& input, CallArgs& args);
  absl::StatusOr<bool> Test(const std::string& name, const Value& input, CallArgs& args);
  // A string built by a filter or method that does not track provenance itself is wholly
  // untrusted when any of its inputs held untrusted text.
  static Value Untrusted(Value result, const Value& input, const CallArgs& args);
  // An error at the node being evaluated.
  absl::Status Error(const std::string& message) const;
  // Accounts for bytes or elements produced, so quadratic templates stop instead of hanging.
  absl::Status Charge(size_t units);
  // Refuses containers whose printed form could exceed the output limit (see weight()).
  absl::Status CheckWeight(const Value& v) const;
  const RenderLimits& limits() const { return limits_; }
  // Namespaces are mutable and can end up containing themselves (`set ns.a = [ns]`); the
  // interpreter empties every one it created when the render ends, breaking such cycles.
  void TrackNamespace(const Value& ns) { namespaces_.push_back(ns); }

 private:
  struct Scope {
    Scope* parent;
    std::unordered_map<std::string, Value> vars;
  };
  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> Exec(const Body& body, Scope& scope, Text& out);
  absl::StatusOr<Flow> ExecStmt(const Stmt& s, Scope& scope, Text& out);
  absl::StatusOr<Flow> ExecFor(const Stmt& s, Scope& scope, Text& out);
  absl::Status ExecSet(const Stmt& s, Scope& scope);
  absl::StatusOr<Value> Eval(const Expr& e, Scope& scope);
  absl::StatusOr<Value> EvalNode(const Expr& e, Scope& scope);
  absl::StatusOr<Flow> ExecNode(const Stmt& s, Scope& scope, Text& out);
  absl::StatusOr<Value> EvalBinary(const Expr& e, Scope& scope);
  absl::StatusOr<Value> EvalCall(const Expr& e, Scope& scope);
  absl::Status EvalArgs(const Expr& e, size_t first, Scope& scope, CallArgs& args);
  absl::StatusOr<Value> CallMacro(const Value& macro, CallArgs& args, Value caller);
  absl::Status Append(Text& out, const Text& text);
  Value Lookup(const std::string& name, Scope& scope) const;

  const RenderLimits limits_;
  Scope root_;
  int line_ = 0;
  int call_depth_ = 0;
  int nesting_ = 0;
  int64_t iterations_ = 0;
  size_t work_ = 0;
  std::vector<Value> namespaces_;
};

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_INTERPRETER_H_
