#include "server/openai/openai_json.h"

#include "absl/strings/str_cat.h"

namespace tandem::server {

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse JsonResponse(int status, const nlohmann::json& value) {
  HttpResponse response;
  response.status = status;
  response.content_type = "application/json";
  response.body = DumpJson(value);
  return response;
}

std::string SseEvent(const nlohmann::json& value) {
  return absl::StrCat("data: ", DumpJson(value), "\n\n");
}

}  // namespace tandem::server
