#include "server/metrics/metrics_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace tandem::server {
namespace {

constexpr size_t kMaxRequestBytes = 8192;           // a scrape's request is a few hundred
constexpr auto kRequestTimeout = std::chrono::seconds(5);  // a silent client is dropped

// Writes all of `data`; gives up on error (the client went away).
void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const std::string& status, const std::string& content_type,
                     const std::string& body, bool with_body) {
  return absl::StrCat("HTTP/1.0 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                      with_body ? body : "");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& host, int port,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port must be in [0, 65535], got ", port));
  }
  const std::string address = host.find(':') != std::string::npos
                                  ? absl::StrCat("[", host, "]:", port)
                                  : absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int e = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); e != 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot resolve ", address, ": ", gai_strerror(e)));
  }
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && endpoint->listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) {
      endpoint->listen_fd_ = fd;
    } else {
      error = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (endpoint->listen_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("metrics: could not listen on ", address, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t size = sizeof(bound);
  getsockname(endpoint->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &size);
  endpoint->port_ = ntohs(bound.ss_family == AF_INET6
                              ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (pipe2(endpoint->wake_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("metrics: pipe: ", std::strerror(errno)));
  }
  endpoint->collectables_ = std::move(collectables);
  endpoint->thread_ = std::thread([e = endpoint.get()] { e->Serve(); });
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (thread_.joinable()) {
    const char byte = 0;
    (void)!write(wake_pipe_[1], &byte, 1);
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_pipe_[0], wake_pipe_[1]}) {
    if (fd >= 0) close(fd);
  }
}

std::string MetricsEndpoint::Exposition() const {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& collectable : collectables_) {
    std::vector<prometheus::MetricFamily> more = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

void MetricsEndpoint::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    Answer(connection);
    close(connection);
  }
}

void MetricsEndpoint::Answer(int connection) const {
  // Read up to the end of the request headers, within a size and a time limit.
  timeval timeout{static_cast<time_t>(kRequestTimeout.count()), 0};
  setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string request;
  char buffer[1024];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.find("\n\n") == std::string::npos) {
    if (request.size() >= kMaxRequestBytes) {
      SendAll(connection, Response("431 Request Header Fields Too Large", "text/plain",
                                   "request too large\n", true));
      return;
    }
    const ssize_t n = recv(connection, buffer, sizeof(buffer), 0);
    if (n <= 0) return;  // closed, timed out or failed: nothing to answer
    request.append(buffer, static_cast<size_t>(n));
  }
  // "GET /metrics HTTP/1.1"; a query string is allowed and ignored.
  const std::string line = request.substr(0, request.find_first_of("\r\n"));
  const size_t method_end = line.find(' ');
  const size_t target_end = line.find(' ', method_end + 1);
  if (method_end == std::string::npos || target_end == std::string::npos) {
    SendAll(connection, Response("400 Bad Request", "text/plain", "bad request line\n", true));
    return;
  }
  const std::string method = line.substr(0, method_end);
  std::string target = line.substr(method_end + 1, target_end - method_end - 1);
  target = target.substr(0, target.find('?'));
  if (method != "GET" && method != "HEAD") {
    SendAll(connection,
            Response("405 Method Not Allowed", "text/plain", "only GET and HEAD\n", true));
    return;
  }
  if (target != "/metrics") {
    SendAll(connection, Response("404 Not Found", "text/plain",
                                 "tandem serves its metrics at /metrics\n", method == "GET"));
    return;
  }
  SendAll(connection, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                               Exposition(), method == "GET"));
}

}  // namespace tandem::server
