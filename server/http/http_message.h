// HTTP/1.x requests and responses as our endpoints see them, and the request parser: the
// request line and headers only (our endpoints take no bodies; a request with one is refused),
// within a size limit.
#ifndef TANDEM_SERVER_HTTP_HTTP_MESSAGE_H_
#define TANDEM_SERVER_HTTP_HTTP_MESSAGE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::server {

struct HttpRequest {
  std::string method;                                        // "GET"
  std::string path;                                          // "/metrics", without the query string
  std::string query;                                         // after '?', undecoded
  std::string version;                                       // "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string peer;                                          // the client's address, for logs

  // The first header of that (lower-case) name.
  std::optional<absl::string_view> Header(absl::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  bool head_only = false;  // a HEAD request: headers (with the body's length) but no body

  static HttpResponse Text(int status, std::string body);
  // The whole response on the wire, always with Connection: close.
  std::string Serialize() const;
};

// The reason phrase of a status code we send ("Not Found").
const char* StatusReason(int status);

// Parses the head of a request (request line and headers, up to and including the blank line).
// INVALID_ARGUMENT saying what was malformed.
absl::StatusOr<HttpRequest> ParseRequestHead(absl::string_view head);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_HTTP_HTTP_MESSAGE_H_
