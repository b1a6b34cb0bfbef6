// Structured output's grammars: the JSON texts a JSON Schema accepts, or any JSON object
// (OpenAI's response_format json_object).
//
// What a schema compiles to, keyword by keyword (a keyword outside this list is refused by name,
// never ignored, so a client never gets output its schema would reject without being told):
//   type (one or a list)       null, boolean, integer, number, string, array, object
//   enum, const                exactly the values given, written compactly
//   anyOf, oneOf               any of the subschemas (oneOf is not checked for exclusivity)
//   allOf                      with one subschema only
//   $ref                       "#" or a JSON pointer into the schema ("#/$defs/Name"); recursion
//                              is allowed as long as a finite value exists
//   integer, number            minimum, maximum, exclusiveMinimum, exclusiveMaximum, exactly
//                              (json_number_range.h)
//   string                     minLength, maxLength (in characters), format
//                              (json_string_format.h), pattern (json_string_pattern.h)
//   array                      items, prefixItems (or items as a list with additionalItems),
//                              minItems, maxItems
//   object                     properties, required, additionalProperties
//   annotations (ignored)      title, description, default, examples, $schema, $id, $comment,
//                              deprecated, readOnly, writeOnly, $defs, definitions
// Objects: declared properties come in the schema's order, the required ones always, the others
// when the model chooses. additionalProperties, when absent, allows none if `properties` is
// given (every output still validates; the model does not invent keys) and any otherwise.
// Whitespace: at most one space, or a newline and up to 20 spaces or tabs, between tokens, so
// that output may be pretty-printed but cannot run on in whitespace. The text may start with
// whitespace and ends where the value ends.
#ifndef TANDEM_ENGINE_JSON_SCHEMA_GRAMMAR_H_
#define TANDEM_ENGINE_JSON_SCHEMA_GRAMMAR_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar.h"

namespace tandem::engine {

// Nesting deeper than this in a schema's text is refused before parsing.
inline constexpr int kMaxJsonSchemaDepth = 64;

// The grammar of a schema given as JSON text. INVALID_ARGUMENT naming the keyword and where it is
// (a JSON pointer) when the schema is not one tandem can enforce, or when the text is not JSON or
// nests deeper than kMaxJsonSchemaDepth. (Parsed here, in member order: the order of an object's
// properties is the order the model writes them in.)
absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_text);
// Literal text around JSON values, for output that embeds JSON in a model's own markup (a tool
// call: "<tool_call>\n" VALUE "\n</tool_call>"). The text is
//   before, open VALUE close, (separator, open VALUE close) ..., after
// with min_count to max_count values (max_count < 0: no limit), each of the schema.
struct JsonFrame {
  std::string before, open, close, separator, after;
  int32_t min_count = 1;
  int32_t max_count = 1;
};
absl::StatusOr<Grammar> FramedJsonSchemaGrammar(std::string_view schema_text,
                                                const JsonFrame& frame);

// Any JSON object.
Grammar JsonObjectGrammar();

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_JSON_SCHEMA_GRAMMAR_H_
