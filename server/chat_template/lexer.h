// Splits template source into tokens the way jinja2's lexer does under transformers'
// settings (trim_blocks, lstrip_blocks, no trailing newline kept): whitespace control is
// applied here, so the parser sees final text.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_LEXER_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::chat_template {

struct Token {
  enum class Type {
    kText,
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,
    kInt,
    kFloat,
    kOp,  // punctuation and operators; `text` holds the spelling
    kEof,
  };
  Type type;
  std::string text;  // text data, name, decoded string literal, number or operator spelling
  int line = 1;
  int column = 1;
};

std::string DescribeToken(const Token& t);

absl::StatusOr<std::vector<Token>> Tokenize(const std::string& source);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_LEXER_H_
