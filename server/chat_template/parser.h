// Builds the AST from the token stream. Errors name the line, the column and what was
// expected; nesting deeper than kMaxParseDepth is refused so hostile templates cannot
// exhaust the stack.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_PARSER_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_PARSER_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/chat_template/ast.h"

namespace tandem::chat_template {

inline constexpr int kMaxParseDepth = 128;

absl::StatusOr<Body> ParseTemplate(const std::string& source);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_PARSER_H_
