// A minimal HTTP/1.x client over loopback for the tests that talk to our HTTP endpoints
// (/metrics, the OpenAI API) and Prometheus' API: one request per connection (Connection: close),
// plaintext or TLS (OpenSSL, trusting one CA file), and the response split into status, head and
// body.
#ifndef TANDEM_TESTS_SERVER_HTTP_TEST_CLIENT_H_
#define TANDEM_TESTS_SERVER_HTTP_TEST_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace tandem::server::testing {

struct HttpResponse {
  int status = 0;  // 0: no connection or no HTTP answer
  std::string head;
  std::string body;
};

// A port free at the time of asking (the kernel's pick for port 0).
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(address.sin_port);
}

// A TCP connection to 127.0.0.1:port whose reads give up after `timeout_seconds`; -1 on failure.
inline int ConnectLoopback(int port, int timeout_seconds = 10) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval timeout{timeout_seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// "HTTP/1.x NNN reason\r\n...\r\n\r\nbody"
inline HttpResponse ParseHttpResponse(const std::string& raw) {
  HttpResponse response;
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12) return response;
  response.status = std::atoi(raw.c_str() + 9);
  const size_t body = raw.find("\r\n\r\n");
  response.head = raw.substr(0, body);
  if (body != std::string::npos) response.body = raw.substr(body + 4);
  return response;
}

// Sends `request` verbatim and reads until the server closes the connection.
inline HttpResponse HttpExchange(int port, const std::string& request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return {};
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return {};
  }
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) raw.append(buffer, n);
  close(fd);
  return ParseHttpResponse(raw);
}

// GET http://127.0.0.1:port<target>, with extra header lines ("Name: value\r\n" each).
inline HttpResponse HttpGet(int port, const std::string& target, const std::string& headers = "") {
  return HttpExchange(port,
                      "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" + headers + "\r\n");
}

// POST http://127.0.0.1:port<target> with a JSON body, with extra header lines.
inline HttpResponse HttpPost(int port, const std::string& target, const std::string& body,
                             const std::string& headers = "") {
  return HttpExchange(port, "POST " + target +
                                " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                                "Content-Type: application/json\r\n"
                                "Content-Length: " +
                                std::to_string(body.size()) + "\r\n" + headers + "\r\n" + body);
}

// The same over TLS, verifying the server against `ca_file` (the name is not checked: the test
// certificate names localhost and we connect by address).
inline HttpResponse HttpsGet(int port, const std::string& target, const std::string& ca_file,
                             const std::string& headers = "") {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return {};
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  std::string raw;
  if (SSL_connect(ssl) == 1) {
    const std::string request = "GET " + target +
                                " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers +
                                "\r\n";
    if (SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0) {
      char buffer[4096];
      for (int n; (n = SSL_read(ssl, buffer, sizeof(buffer))) > 0;) raw.append(buffer, n);
    }
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
  return ParseHttpResponse(raw);
}

}  // namespace tandem::server::testing

#endif  // TANDEM_TESTS_SERVER_HTTP_TEST_CLIENT_H_
