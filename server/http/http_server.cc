#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/http/http_connection.h"

namespace tandem::server {
namespace {

std::string Address(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

std::string PeerAddress(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return absl::StrCat(text, ":", ntohs(in->sin_port));
  }
  if (peer.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return absl::StrCat("[", text, "]:", ntohs(in6->sin6_port));
  }
  return text;
}

// What ReadHead read: the head, and the bytes after it (the start of a body).
struct Head {
  std::string head;
  std::string rest;
};

// Reads the request head: everything up to the blank line that ends the headers, starting with
// `pending` (bytes already read past the previous request). While nothing of it has arrived,
// the wait ends at `idle_deadline` with CANCELLED (a kept-alive connection nobody uses).
absl::StatusOr<Head> ReadHead(HttpConnection& connection, size_t max_bytes, std::string pending,
                              Deadline idle_deadline, Deadline deadline) {
  std::string head = std::move(pending);
  char buffer[2048];
  for (;;) {
    size_t end = head.find("\r\n\r\n");
    if (end != std::string::npos) {
      end += 4;
    } else if (end = head.find("\n\n"); end != std::string::npos) {
      end += 2;
    }
    if (end != std::string::npos) return Head{head.substr(0, end), head.substr(end)};
    if (head.size() >= max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the request head is larger than ", max_bytes, " bytes"));
    }
    const bool idle = head.empty() && idle_deadline < deadline;
    absl::StatusOr<size_t> n =
        connection.Read(buffer, sizeof(buffer), idle ? idle_deadline : deadline);
    if (idle && absl::IsDeadlineExceeded(n.status())) {
      return absl::CancelledError("no next request on the kept-alive connection");
    }
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::CancelledError("the client closed the connection");
    head.append(buffer, *n);
  }
}

// Reads the rest of a Content-Length body into request->body (which holds its start); bytes
// past it (a pipelined next request) go to `pending`.
absl::Status ReadBody(HttpConnection& connection, HttpRequest* request, Deadline deadline,
                      std::string* pending) {
  const size_t length = static_cast<size_t>(request->content_length.value_or(0));
  std::string& body = request->body;
  if (body.size() > length) {
    *pending = body.substr(length);
    body.resize(length);
  }
  body.reserve(length);
  char buffer[16384];
  while (body.size() < length) {
    absl::StatusOr<size_t> n =
        connection.Read(buffer, std::min(sizeof(buffer), length - body.size()), deadline);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::CancelledError("the client closed the connection");
    body.append(buffer, *n);
  }
  return absl::OkStatus();
}

// Whether the client lets the connection carry another request: HTTP/1.1 unless it says
// "Connection: close", HTTP/1.0 only when it says "Connection: keep-alive".
bool ClientKeepsAlive(const HttpRequest& request) {
  const absl::string_view connection = request.Header("connection").value_or("");
  if (request.version == "HTTP/1.0") return absl::EqualsIgnoreCase(connection, "keep-alive");
  return !absl::EqualsIgnoreCase(connection, "close");
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler) {
  return Start(options, [handler = std::move(handler)](const HttpRequest& request,
                                                       HttpResponseWriter& writer) {
    (void)writer.Send(handler(request));  // a client that left cannot be answered anyway
  });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpStreamHandler handler) {
  const std::string address = Address(options.host, options.port);
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.name, ": port must be in [0, 65535], got ", options.port));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options.port);
  if (const int e = getaddrinfo(options.host.c_str(), service.c_str(), &hints, &found); e != 0) {
    return absl::UnavailableError(
        absl::StrCat(options.name, ": cannot resolve ", address, ": ", gai_strerror(e)));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options, std::move(handler)));
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && server->listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) {
      server->listen_fd_ = fd;
    } else {
      error = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (server->listen_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat(options.name, ": could not listen on ", address, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t size = sizeof(bound);
  getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &size);
  server->port_ =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (pipe2(server->stop_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat(options.name, ": pipe: ", std::strerror(errno)));
  }
  server->acceptor_ = std::thread([s = server.get()] { s->Accept(); });
  return server;
}

HttpServer::~HttpServer() {
  if (acceptor_.joinable()) {
    const char byte = 0;
    (void)!write(stop_pipe_[1], &byte, 1);  // every poll in every thread wakes on this
    acceptor_.join();
  }
  for (Worker& worker : workers_) worker.thread.join();
  for (int fd : {listen_fd_, stop_pipe_[0], stop_pipe_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void HttpServer::JoinFinishedWorkers() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->finished.load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void HttpServer::Accept() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer{};
    socklen_t peer_size = sizeof(peer);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_size,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    JoinFinishedWorkers();
    if (active_.load() >= options_.max_connections) {
      // Busy: say so without waiting for the client (the socket is non-blocking) and move on,
      // in the endpoint's error format (an OpenAI client expects its JSON error body).
      const std::string busy = Error(503, "too many connections; try again").Serialize();
      (void)!send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
      close(fd);
      continue;
    }
    ++active_;
    Worker& worker = workers_.emplace_back();
    worker.thread = std::thread([this, fd, &worker, peer_text = PeerAddress(peer)] {
      Serve(fd, peer_text);
      --active_;
      worker.finished = true;
    });
  }
}

HttpResponse HttpServer::Error(int status, const std::string& message) const {
  return options_.error_response ? options_.error_response(status, message)
                                 : HttpResponse::Text(status, message + "\n");
}

int HttpServer::RefuseBody(const HttpRequest& request, std::string* why) const {
  const bool chunked = request.Header("transfer-encoding").has_value();
  const uint64_t length = request.content_length.value_or(0);
  if (options_.max_body_bytes == 0) {
    *why = "this endpoint takes no request body";
    return chunked || length > 0 ? 400 : 0;
  }
  if (chunked) {
    *why = "Transfer-Encoding request bodies are not supported; send the body with Content-Length";
    return 501;
  }
  if (!request.content_length.has_value() && request.method == "POST") {
    *why = "a POST needs a Content-Length header";
    return 411;
  }
  if (length > options_.max_body_bytes) {
    *why = absl::StrCat("the request body is ", length, " bytes, more than the server's limit of ",
                        options_.max_body_bytes);
    return 413;
  }
  return 0;
}

void HttpServer::Serve(int fd, const std::string& peer) {
  HttpConnection connection(fd, stop_pipe_[0], options_.tls ? options_.tls->get() : nullptr);
  const Deadline accepted = std::chrono::steady_clock::now();
  if (!connection.Handshake(accepted + options_.request_timeout).ok()) return;
  std::string pending;
  for (int served = 0; ServeRequest(connection, peer, served, &pending); ++served) {
  }
}

bool HttpServer::ServeRequest(HttpConnection& connection, const std::string& peer, int served,
                              std::string* pending) {
  const Deadline now = std::chrono::steady_clock::now();
  const Deadline request_deadline = now + options_.request_timeout;
  // The first request has the whole request timeout to begin; a kept-alive connection waits
  // only keep_alive_idle for the next.
  const Deadline idle_deadline = served == 0 ? request_deadline : now + options_.keep_alive_idle;
  HttpResponseWriter writer(connection, options_.response_timeout, /*head_only=*/false);
  // A refusal sent before the whole request was read: what the client still sends is drained
  // (briefly) so that the refusal reaches it, and the connection ends.
  auto refuse = [&](int status, const std::string& message) {
    (void)writer.Send(Error(status, message));
    connection.DrainAndClose(std::chrono::steady_clock::now() + std::chrono::seconds(1));
    return false;
  };
  absl::StatusOr<Head> head = ReadHead(connection, options_.max_head_bytes, std::move(*pending),
                                       idle_deadline, request_deadline);
  pending->clear();
  if (!head.ok()) {
    if (absl::IsDeadlineExceeded(head.status())) {
      return refuse(408, "the request did not arrive in time");
    }
    if (absl::IsResourceExhausted(head.status())) {
      return refuse(431, std::string(head.status().message()));
    }
    return false;  // closed by the client, idle, or the server is stopping: nobody to answer
  }
  absl::StatusOr<HttpRequest> request = ParseRequestHead(head->head);
  if (!request.ok()) {
    return refuse(absl::IsUnimplemented(request.status()) ? 505 : 400,
                  std::string(request.status().message()));
  }
  request->peer = peer;
  std::string why;
  if (const int status = RefuseBody(*request, &why); status != 0) return refuse(status, why);
  request->body = std::move(head->rest);
  // A client that asked whether its body is welcome (curl does for bodies over 1 KiB) would
  // otherwise wait a second before sending it.
  if (const std::optional<absl::string_view> expect = request->Header("expect");
      expect && absl::EqualsIgnoreCase(*expect, "100-continue") &&
      request->body.size() < request->content_length.value_or(0)) {
    (void)connection.Write("HTTP/1.1 100 Continue\r\n\r\n", request_deadline);
  }
  if (absl::Status s = ReadBody(connection, &*request, request_deadline, pending); !s.ok()) {
    if (absl::IsDeadlineExceeded(s)) return refuse(408, "the request body did not arrive in time");
    return false;
  }
  const bool keep_alive = options_.keep_alive &&
                          served + 1 < options_.max_requests_per_connection &&
                          ClientKeepsAlive(*request);
  HttpResponseWriter handler_writer(connection, options_.response_timeout,
                                    request->method == "HEAD", keep_alive);
  handler_(*request, handler_writer);
  return handler_writer.reusable();
}

}  // namespace tandem::server
