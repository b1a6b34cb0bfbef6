// Python's two string-formatting languages, as templates reach them: printf-style `fmt % args`
// (and jinja2's |format filter) and str.format / str.format_map (through jinja2's sandboxed
// formatter, whose field lookups are jinja2's getattr/getitem). A Markup format string escapes
// what it substitutes. Substituted text keeps its provenance when it is inserted verbatim and
// is wholly untrusted otherwise.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_FORMAT_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_FORMAT_H_

#include "absl/status/statusor.h"
#include "server/chat_template/interpreter.h"
#include "server/chat_template/value.h"

namespace tandem::chat_template {

// `fmt % args`: a tuple supplies positional arguments, a dict named ones (%(name)s), anything
// else is the single argument.
absl::StatusOr<Value> PercentFormat(Interpreter& in, const Value& fmt, const Value& args);
// fmt.format(*args.positional, **args.keyword).
absl::StatusOr<Value> StrFormat(Interpreter& in, const Value& fmt, const CallArgs& args);
// format(value, spec), the builtin behind every replacement field.
absl::StatusOr<Text> FormatSpec(Interpreter& in, const Value& value, const std::string& spec);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_FORMAT_H_
