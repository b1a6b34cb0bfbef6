// How a handler answers on its connection: a whole response at once, or a head followed by a body
// written piece by piece as it is produced (Server-Sent Events), each piece flushed to the client
// at once. Every write gets the server's response timeout of its own, so a client that stops
// reading holds its connection no longer than that; one that hangs up is seen by the next write
// or by Abandoned(), which a handler waiting on something else polls. A streamed body ends with
// the connection, so only a whole response can leave it open for another request.
#ifndef TANDEM_SERVER_HTTP_HTTP_RESPONSE_WRITER_H_
#define TANDEM_SERVER_HTTP_HTTP_RESPONSE_WRITER_H_

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/http/http_connection.h"
#include "server/http/http_message.h"

namespace tandem::server {

class HttpResponseWriter {
 public:
  // `head_only`: the request was HEAD (a whole response is sent without its body).
  // `keep_alive`: a whole response may leave the connection open for the next request.
  HttpResponseWriter(HttpConnection& connection, std::chrono::milliseconds write_timeout,
                     bool head_only, bool keep_alive = false)
      : connection_(connection),
        write_timeout_(write_timeout),
        head_only_(head_only),
        keep_alive_(keep_alive) {}

  // The whole response. Once per request, and not after StartStream.
  absl::Status Send(HttpResponse response);
  // The head of a response whose body follows in Write calls and ends with the connection
  // (`head`'s body is ignored).
  absl::Status StartStream(HttpResponse head);
  absl::Status Write(absl::string_view data);
  // The connection may carry another request: a whole response went out, kept alive.
  bool reusable() const { return reusable_; }
  // The client hung up or the server is stopping (HttpConnection::Abandoned).
  bool Abandoned() const { return connection_.Abandoned(); }

 private:
  HttpConnection& connection_;
  const std::chrono::milliseconds write_timeout_;
  const bool head_only_;
  const bool keep_alive_;
  bool started_ = false;
  bool reusable_ = false;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_HTTP_HTTP_RESPONSE_WRITER_H_
