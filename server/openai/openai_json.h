// JSON on the wire: responses and Server-Sent Events. Text the model generated is UTF-8 by the
// engine's contract, but serializing never throws on it regardless (invalid bytes become U+FFFD).
#ifndef TANDEM_SERVER_OPENAI_OPENAI_JSON_H_
#define TANDEM_SERVER_OPENAI_OPENAI_JSON_H_

#include <string>

#include "nlohmann/json.hpp"
#include "server/http/http_message.h"

namespace tandem::server {

std::string DumpJson(const nlohmann::json& value);
// `value` as the body of a response with that status.
HttpResponse JsonResponse(int status, const nlohmann::json& value);
// One Server-Sent Event: "data: <json>\n\n".
std::string SseEvent(const nlohmann::json& value);
// The last event of an OpenAI stream.
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_OPENAI_JSON_H_
