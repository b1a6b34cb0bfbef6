// Client JSON on its way into proto requests: a bound on nesting checked on the raw text before
// parsing (the parser and everything that walks its result are recursive, so a body of a
// million '[' must be refused before it reaches them), and nlohmann JSON to protobuf's
// Struct/Value (tools, tool calls, chat_template_kwargs), which the gRPC layer then validates
// like any ChatRequest.
#ifndef TANDEM_SERVER_OPENAI_JSON_VALUES_H_
#define TANDEM_SERVER_OPENAI_JSON_VALUES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "nlohmann/json.hpp"

namespace tandem::server {

// Deeper nesting than this is refused before parsing (the chat template's own limit is lower:
// chat_variables.h).
inline constexpr int kMaxRequestJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (strings skipped), counted without
// parsing; stops counting past `limit`.
int JsonNestingDepth(absl::string_view text, int limit);

// `value` as a protobuf Value (numbers become doubles, as Struct keeps them).
void ToProtoValue(const nlohmann::json& value, google::protobuf::Value* out);
// An object as a Struct; INVALID_ARGUMENT naming `field` when `value` is not an object.
absl::Status ToProtoStruct(const nlohmann::json& value, const std::string& field,
                           google::protobuf::Struct* out);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_JSON_VALUES_H_
