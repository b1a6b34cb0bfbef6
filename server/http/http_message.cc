#include "server/http/http_message.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::server {

std::optional<absl::string_view> HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return std::nullopt;
}

const char* StatusReason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpResponse HttpResponse::Text(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

std::string HttpResponse::SerializeHead() const {
  std::string out = absl::StrCat("HTTP/1.1 ", status, " ", StatusReason(status),
                                 "\r\nContent-Type: ", content_type, "\r\n");
  if (!close_delimited) absl::StrAppend(&out, "Content-Length: ", body.size(), "\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&out, name, ": ", value, "\r\n");
  const bool keep = keep_alive && !close_delimited;
  absl::StrAppend(&out, "Connection: ", keep ? "keep-alive" : "close", "\r\n\r\n");
  return out;
}

std::string HttpResponse::Serialize() const {
  std::string out = SerializeHead();
  if (!head_only) out += body;
  return out;
}

absl::StatusOr<HttpRequest> ParseRequestHead(absl::string_view head) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
  for (absl::string_view& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  if (lines.empty() || lines[0].empty()) {
    return absl::InvalidArgumentError("empty request line");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) {
    return absl::InvalidArgumentError("the request line is not 'METHOD TARGET HTTP/1.x'");
  }
  HttpRequest request;
  request.method = std::string(parts[0]);
  request.version = std::string(parts[2]);
  if (request.version != "HTTP/1.1" && request.version != "HTTP/1.0") {
    return absl::UnimplementedError(absl::StrCat("unsupported version '", request.version, "'"));
  }
  const absl::string_view target = parts[1];
  const size_t question = target.find('?');
  request.path = std::string(target.substr(0, question));
  if (question != absl::string_view::npos) request.query = std::string(target.substr(question + 1));
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) break;  // the blank line that ends the head
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("header line ", i, " has no name"));
    }
    request.headers.emplace_back(
        absl::AsciiStrToLower(lines[i].substr(0, colon)),
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
  }
  for (const auto& [name, value] : request.headers) {
    if (name != "content-length") continue;
    uint64_t bytes = 0;
    // Digits only (SimpleAtoi would take "+5" and " 5"), and several headers must agree
    // (RFC 9110 §8.6): two lengths are how requests get smuggled past proxies.
    const bool digits = !value.empty() && value.size() <= 18 &&
                        value.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || !absl::SimpleAtoi(value, &bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Content-Length: '", value, "' is not a byte count"));
    }
    if (request.content_length.has_value() && *request.content_length != bytes) {
      return absl::InvalidArgumentError("Content-Length: given twice with different values");
    }
    request.content_length = bytes;
  }
  return request;
}

}  // namespace tandem::server
