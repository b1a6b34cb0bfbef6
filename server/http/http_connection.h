// One accepted HTTP connection: a byte stream over a non-blocking socket, in TLS when the server
// has a certificate, where every read and write waits at most until a deadline and returns at
// once when the server stops. That is what keeps a client that sends a byte a second, or never
// reads, from holding anything beyond its own connection for longer than its deadline.
#ifndef TANDEM_SERVER_HTTP_HTTP_CONNECTION_H_
#define TANDEM_SERVER_HTTP_HTTP_CONNECTION_H_

#include <chrono>
#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace tandem::server {

using Deadline = std::chrono::steady_clock::time_point;

class HttpConnection {
 public:
  // Takes ownership of `fd` (made non-blocking here). `stop_fd` becomes readable when the server
  // stops. `tls` may be null (plaintext).
  HttpConnection(int fd, int stop_fd, SSL_CTX* tls);
  ~HttpConnection();  // closes the socket (after a TLS close_notify when the handshake was done)
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // The TLS handshake (a no-op in plaintext). DEADLINE_EXCEEDED, CANCELLED (server stopping) or
  // UNAVAILABLE with OpenSSL's reason.
  absl::Status Handshake(Deadline deadline);
  // Up to `size` bytes; 0 when the peer closed. Errors as Handshake.
  absl::StatusOr<size_t> Read(char* buffer, size_t size, Deadline deadline);
  // All of `data`. Errors as Handshake.
  absl::Status Write(absl::string_view data, Deadline deadline);
  // Without waiting: true when the peer has hung up (or the socket failed) or the server is
  // stopping. For a handler that waits on something else (the engine) while its client may
  // leave; data the client sends meanwhile does not count.
  bool Abandoned() const;
  // Ends our side of the connection and reads (and drops) what the client still sends, until
  // it closes or `deadline`: closing a socket with unread input makes the kernel send a reset,
  // which can destroy the response we just wrote (an early 413) before the client reads it.
  void DrainAndClose(Deadline deadline);

 private:
  // Waits until the socket is readable (or writable) or the deadline or stop comes.
  absl::Status Wait(bool for_write, Deadline deadline);

  int fd_;
  int stop_fd_;
  SSL* ssl_ = nullptr;
  bool handshake_done_ = false;
  bool shut_down_ = false;  // close_notify sent
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_HTTP_HTTP_CONNECTION_H_
