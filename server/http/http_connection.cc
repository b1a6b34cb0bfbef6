#include "server/http/http_connection.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/http/tls_context.h"

namespace tandem::server {

HttpConnection::HttpConnection(int fd, int stop_fd, SSL_CTX* tls) : fd_(fd), stop_fd_(stop_fd) {
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  if (tls != nullptr) {
    ssl_ = SSL_new(tls);
    if (ssl_ != nullptr) SSL_set_fd(ssl_, fd_);
  }
}

HttpConnection::~HttpConnection() {
  if (ssl_ != nullptr) {
    // Best effort, never waiting: the peer may be gone.
    if (handshake_done_ && !shut_down_) SSL_shutdown(ssl_);
    SSL_free(ssl_);
  }
  close(fd_);
}

absl::Status HttpConnection::Wait(bool for_write, Deadline deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return absl::DeadlineExceededError("the connection's deadline passed");
    pollfd fds[2] = {{fd_, static_cast<short>(for_write ? POLLOUT : POLLIN), 0},
                     {stop_fd_, POLLIN, 0}};
    const int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
    if (fds[1].revents != 0) return absl::CancelledError("the server is stopping");
    // An error or hang-up is reported by the read or write that follows.
    if (fds[0].revents != 0) return absl::OkStatus();
  }
}

absl::Status HttpConnection::Handshake(Deadline deadline) {
  if (ssl_ == nullptr || handshake_done_) return absl::OkStatus();
  for (;;) {
    ERR_clear_error();
    const int r = SSL_accept(ssl_);
    if (r == 1) {
      handshake_done_ = true;
      return absl::OkStatus();
    }
    const int error = SSL_get_error(ssl_, r);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      return absl::UnavailableError(absl::StrCat("TLS handshake: ", TakeOpenSslErrors()));
    }
    if (absl::Status s = Wait(error == SSL_ERROR_WANT_WRITE, deadline); !s.ok()) return s;
  }
}

absl::StatusOr<size_t> HttpConnection::Read(char* buffer, size_t size, Deadline deadline) {
  for (;;) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      if (n > 0) return static_cast<size_t>(n);
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_ZERO_RETURN) return 0;
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        // A peer that closes without close_notify ends the stream too.
        if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_SSL) return 0;
        return absl::UnavailableError(absl::StrCat("TLS read: ", TakeOpenSslErrors()));
      }
      if (absl::Status s = Wait(error == SSL_ERROR_WANT_WRITE, deadline); !s.ok()) return s;
      continue;
    }
    const ssize_t n = recv(fd_, buffer, size, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return 0;  // reset: treated as closed
    if (absl::Status s = Wait(false, deadline); !s.ok()) return s;
  }
}

absl::Status HttpConnection::Write(absl::string_view data, Deadline deadline) {
  while (!data.empty()) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n =
          SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        return absl::UnavailableError(absl::StrCat("TLS write: ", TakeOpenSslErrors()));
      }
      if (absl::Status s = Wait(error == SSL_ERROR_WANT_WRITE, deadline); !s.ok()) return s;
      continue;
    }
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = Wait(true, deadline); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace tandem::server

namespace tandem::server {

bool HttpConnection::Abandoned() const {
  pollfd fds[2] = {{fd_, POLLRDHUP, 0}, {stop_fd_, POLLIN, 0}};
  if (poll(fds, 2, 0) <= 0) return false;
  return fds[1].revents != 0 || (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void HttpConnection::DrainAndClose(Deadline deadline) {
  if (ssl_ != nullptr && handshake_done_ && !shut_down_) {
    SSL_shutdown(ssl_);
    shut_down_ = true;
  }
  shutdown(fd_, SHUT_WR);
  // Raw bytes, even under TLS: they are dropped unread. Bounded by the deadline alone.
  char buffer[16384];
  for (;;) {
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n == 0) return;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!Wait(false, deadline).ok()) return;
      continue;
    }
    if (n < 0) return;
  }
}

}  // namespace tandem::server
