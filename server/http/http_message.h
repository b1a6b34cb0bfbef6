// HTTP/1.x requests and responses as our endpoints see them, and the request parser: the
// request line and headers (the server reads a Content-Length body after them, where the
// endpoint takes one: http_server.h).
#ifndef TANDEM_SERVER_HTTP_HTTP_MESSAGE_H_
#define TANDEM_SERVER_HTTP_HTTP_MESSAGE_H_

#include <cstdint>
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
  std::optional<uint64_t> content_length;                    // the Content-Length header's
  std::string body;                                          // read by the server (http_server.h)

  // The first header of that (lower-case) name.
  std::optional<absl::string_view> Header(absl::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  bool head_only = false;  // a HEAD request: headers (with the body's length) but no body
  // The body is streamed after the head and ends when the server closes the connection (Server-
  // Sent Events): the head then carries no Content-Length.
  bool close_delimited = false;
  // "Connection: keep-alive" instead of "close" (never with close_delimited).
  bool keep_alive = false;

  static HttpResponse Text(int status, std::string body);
  // The whole response on the wire.
  std::string Serialize() const;
  // The status line and headers, up to and including the blank line.
  std::string SerializeHead() const;
};

// The reason phrase of a status code we send ("Not Found").
const char* StatusReason(int status);

// Parses the head of a request (request line and headers, up to and including the blank line).
// INVALID_ARGUMENT saying what was malformed (a Content-Length that is not one byte count
// included); whether a body is welcome is the server's business.
absl::StatusOr<HttpRequest> ParseRequestHead(absl::string_view head);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_HTTP_HTTP_MESSAGE_H_
