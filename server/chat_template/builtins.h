// Filters, tests, methods of str/dict and the global functions, each in its own file.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_BUILTINS_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_BUILTINS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/chat_template/interpreter.h"
#include "server/chat_template/value.h"

namespace tandem::chat_template {

// filters.cc
absl::StatusOr<Value> ApplyFilter(Interpreter& in, const std::string& name, const Value& v,
                                  CallArgs& args);
bool IsFilterName(const std::string& name);
// Filters and methods whose string results carry exact provenance (or are elements of their
// input); the interpreter marks the results of all others wholly untrusted when an input was.
bool FilterKeepsProvenance(const std::string& name);
// tests.cc
absl::StatusOr<bool> ApplyTest(Interpreter& in, const std::string& name, const Value& v,
                               CallArgs& args);
bool IsTestName(const std::string& name);
// methods.cc: nullopt when `obj` has no such method.
std::optional<absl::StatusOr<Value>> CallMethod(Interpreter& in, const Value& obj,
                                                const std::string& name, CallArgs& args);
bool MethodKeepsProvenance(const std::string& name);
// globals.cc
void AddGlobals(Dict& globals);
// json.cc: Python's json.dumps(ensure_ascii=False) as transformers' tojson calls it.
absl::StatusOr<std::string> DumpJson(const Value& v, const std::string* indent,
                                     const std::string& item_sep, const std::string& key_sep,
                                     bool sort_keys, bool ensure_ascii, size_t max_bytes);
// operators.cc
absl::StatusOr<Value> BinaryOp(Interpreter& in, const std::string& op, const Value& a,
                               const Value& b);
// Python's <, for sorting and comparisons; error on unorderable types.
absl::StatusOr<bool> LessThan(Interpreter& in, const Value& a, const Value& b);
absl::StatusOr<bool> Contains(Interpreter& in, const Value& container, const Value& item);
// Iteration as Python's iter(): lists, dict keys, string code points; undefined is empty.
absl::StatusOr<List> Iterate(Interpreter& in, const Value& v);
// jinja2's environment.getitem / getattr for `a.b`, `a[b]` and attribute filters.
absl::StatusOr<Value> GetAttr(Interpreter& in, const Value& obj, const std::string& name);
absl::StatusOr<Value> GetItem(Interpreter& in, const Value& obj, const Value& key);
absl::StatusOr<Value> Slice(Interpreter& in, const Value& obj, const Value& start,
                            const Value& stop, const Value& step);

// Argument binding shared by filters, tests and methods: positional `i` or keyword `name`.
const Value* Arg(const CallArgs& args, size_t i, const char* name);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_BUILTINS_H_
