// Client JSON on its way into proto requests: nlohmann JSON to protobuf's Struct/Value (tools,
// tool calls, chat_template_kwargs), which the gRPC layer then validates like any ChatRequest.
// The body's nesting is bounded before it is parsed (models/json_depth.h), which also bounds the
// recursion here.
#ifndef TANDEM_SERVER_OPENAI_JSON_VALUES_H_
#define TANDEM_SERVER_OPENAI_JSON_VALUES_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/struct.pb.h"
#include "nlohmann/json.hpp"

namespace tandem::server {

// Deeper nesting than this is refused before parsing (the chat template's own limit is lower:
// chat_variables.h).
inline constexpr int kMaxRequestJsonDepth = 64;

// `value` as a protobuf Value (numbers become doubles, as Struct keeps them).
void ToProtoValue(const nlohmann::json& value, google::protobuf::Value* out);
// An object as a Struct; INVALID_ARGUMENT naming `field` when `value` is not an object.
absl::Status ToProtoStruct(const nlohmann::json& value, const std::string& field,
                           google::protobuf::Struct* out);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_JSON_VALUES_H_
