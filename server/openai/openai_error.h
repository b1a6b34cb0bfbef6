// Errors in OpenAI's shape, {"error": {"message", "type", "param", "code"}}, from the statuses of
// the request path the gRPC service shares (validation, admission, the engine). Those name the
// field as the proto spells it ("sampling.max_new_tokens: must be in [1, 4096], got 5000"); an
// OpenAI client wrote "max_tokens", so the field is renamed to the parameter it sent, and
// becomes `param`.
#ifndef TANDEM_SERVER_OPENAI_OPENAI_ERROR_H_
#define TANDEM_SERVER_OPENAI_OPENAI_ERROR_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "server/http/http_message.h"

namespace tandem::server {

struct OpenAiError {
  int http_status = 500;
  std::string message;
  std::string type;                  // "invalid_request_error", "rate_limit_error", "server_error"
  std::optional<std::string> param;  // the request parameter at fault
  std::optional<std::string> code;   // "model_not_found", "invalid_api_key"
};

// HTTP status by canonical code: INVALID_ARGUMENT and FAILED_PRECONDITION 400, UNAUTHENTICATED
// 401, NOT_FOUND 404 (only an unknown model), ALREADY_EXISTS 409, RESOURCE_EXHAUSTED 429,
// UNAVAILABLE 503, DEADLINE_EXCEEDED 504, anything else 500.
OpenAiError ErrorFromStatus(const absl::Status& status);

// A proto field path in OpenAI's words: "sampling.max_new_tokens" -> "max_tokens",
// "sampling.stop_strings[1]" -> "stop[1]", "sampling.top_p" -> "top_p", "text" and
// "token_ids.ids[3]" -> "prompt", "prompt[3]"; anything else as it is.
std::string OpenAiParam(const std::string& proto_field);

nlohmann::json ErrorJson(const OpenAiError& error);
HttpResponse ErrorResponse(const OpenAiError& error);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_OPENAI_ERROR_H_
