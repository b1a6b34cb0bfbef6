#include "server/openai/openai_error.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/openai/openai_json.h"

namespace tandem::server {
namespace {

int HttpStatus(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

// The field a validation message starts with ("messages[2].role: ..."): a path without spaces
// before ": ".
std::optional<std::string> LeadingField(absl::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == 0 || colon == absl::string_view::npos) return std::nullopt;
  const absl::string_view field = message.substr(0, colon);
  if (field.find(' ') != absl::string_view::npos) return std::nullopt;
  return std::string(field);
}

}  // namespace

std::string OpenAiParam(const std::string& proto_field) {
  // Longest prefixes first: each rule renames a prefix and keeps the rest ("[1]", ".x").
  static constexpr std::pair<const char*, const char*> kRenames[] = {
      {"sampling.max_new_tokens", "max_tokens"},
      {"sampling.stop_strings", "stop"},
      {"sampling.json_schema", "response_format.json_schema.schema"},
      {"sampling.json_object", "response_format"},
      {"sampling.", ""},
      {"token_ids.ids", "prompt"},
      {"text", "prompt"},
  };
  for (const auto& [from, to] : kRenames) {
    if (!absl::StartsWith(proto_field, from)) continue;
    const std::string rest = proto_field.substr(std::string(from).size());
    // "text" must be the whole name or be followed by an index, not be the start of another.
    if (std::string(from) == "text" && !rest.empty() && rest[0] != '[') continue;
    return absl::StrCat(to, rest);
  }
  return proto_field;
}

OpenAiError ErrorFromStatus(const absl::Status& status) {
  OpenAiError error;
  error.http_status = HttpStatus(status.code());
  error.message = std::string(status.message());
  if (std::optional<std::string> field = LeadingField(error.message)) {
    error.param = OpenAiParam(*field);
    error.message = absl::StrCat(*error.param, error.message.substr(field->size()));
  }
  if (error.http_status == 429) {
    error.type = "rate_limit_error";
  } else if (error.http_status >= 500) {
    error.type = "server_error";
  } else {
    error.type = "invalid_request_error";
  }
  if (status.code() == absl::StatusCode::kNotFound) error.code = "model_not_found";
  if (status.code() == absl::StatusCode::kUnauthenticated) error.code = "invalid_api_key";
  return error;
}

nlohmann::json ErrorJson(const OpenAiError& error) {
  nlohmann::json body = {{"message", error.message}, {"type", error.type}};
  body["param"] = error.param ? nlohmann::json(*error.param) : nlohmann::json(nullptr);
  body["code"] = error.code ? nlohmann::json(*error.code) : nlohmann::json(nullptr);
  return {{"error", std::move(body)}};
}

HttpResponse ErrorResponse(const OpenAiError& error) {
  HttpResponse response = JsonResponse(error.http_status, ErrorJson(error));
  if (error.http_status == 401) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tandem\"");
  }
  return response;
}

}  // namespace tandem::server
