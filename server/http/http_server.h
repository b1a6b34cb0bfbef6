// A small HTTP/1.1 server for tandem's non-gRPC endpoints (Prometheus /metrics, the OpenAI API).
//
// Each connection gets a thread of its own, up to max_connections at once (one more is answered
// 503 and closed), and a deadline for the whole request: the TLS handshake and the request head
// must arrive within request_timeout of the accept, and the response must be taken within
// response_timeout. So a client that trickles a byte a second, or never reads, holds one
// connection slot for a few seconds and delays nobody else; and stopping the server interrupts
// every wait at once. A connection carries one request (Connection: close) unless keep_alive is
// set: then a client may send up to max_requests_per_connection requests on it, one after the
// other (pipelined ones are read in turn), each beginning within keep_alive_idle of the previous
// answer; a streamed answer, an error and the last request close it.
//
// Request bodies: only with Content-Length, up to max_body_bytes (0: the endpoint takes none, and
// a request with one is refused 400); beyond it 413, a POST without a length 411, and
// Transfer-Encoding (chunked) bodies 501. The body must arrive within request_timeout too.
#ifndef TANDEM_SERVER_HTTP_HTTP_SERVER_H_
#define TANDEM_SERVER_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/http/http_connection.h"
#include "server/http/http_message.h"
#include "server/http/http_response_writer.h"
#include "server/http/tls_context.h"

namespace tandem::server {

struct HttpServerOptions {
  std::string name = "http";  // in error messages: "metrics: could not listen on ..."
  std::string host = "127.0.0.1";
  int port = 0;                     // 0 picks a free port
  std::shared_ptr<TlsContext> tls;  // null: plaintext
  int max_connections = 32;
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds response_timeout{10000};
  size_t max_head_bytes = 8192;
  uint64_t max_body_bytes = 0;
  bool keep_alive = false;
  std::chrono::milliseconds keep_alive_idle{5000};
  int max_requests_per_connection = 100;
  // How the server's own refusals (400, 408, 411, 413, 431, 501, 505) look; `message` says what
  // was wrong. Null: plain text.
  std::function<HttpResponse(int status, const std::string& message)> error_response;
};

// Called on the connection's thread, concurrently for different connections.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// The same for a handler that writes its response itself (streamed bodies).
using HttpStreamHandler = std::function<void(const HttpRequest&, HttpResponseWriter&)>;

class HttpServer {
 public:
  // Listens on host:port (an IPv4 or IPv6 literal or a name). UNAVAILABLE naming the address
  // when it cannot.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler handler);
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpStreamHandler handler);
  ~HttpServer();  // stops accepting, interrupts every connection and joins their threads
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Connections being served now (tests).
  int active_connections() const { return active_.load(); }

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  HttpServer(const HttpServerOptions& options, HttpStreamHandler handler)
      : options_(options), handler_(std::move(handler)) {}
  void Accept();
  void Serve(int fd, const std::string& peer);
  // One request of the connection (`served` came before it; `pending` holds bytes read past the
  // previous one); true when the connection may carry the next.
  bool ServeRequest(HttpConnection& connection, const std::string& peer, int served,
                    std::string* pending);
  // The request's body policy (see above): 0 when it may be read, else the refusal's status.
  int RefuseBody(const HttpRequest& request, std::string* why) const;
  HttpResponse Error(int status, const std::string& message) const;
  void JoinFinishedWorkers();

  const HttpServerOptions options_;
  const HttpStreamHandler handler_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};  // readable once the server stops
  int port_ = 0;
  std::atomic<int> active_{0};
  std::thread acceptor_;
  std::list<Worker> workers_;  // acceptor thread only, until the destructor joins it
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_HTTP_HTTP_SERVER_H_
