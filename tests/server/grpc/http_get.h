// A minimal HTTP/1.0 GET over loopback for the tests that read /metrics and Prometheus' API.
#ifndef TANDEM_TESTS_SERVER_GRPC_HTTP_GET_H_
#define TANDEM_TESTS_SERVER_GRPC_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace tandem::server::testing {

struct HttpResponse {
  int status = 0;  // 0: no connection or no HTTP answer
  std::string body;
};

// GET http://127.0.0.1:port<target>. Waits up to 10 s for the answer.
inline HttpResponse HttpGet(int port, const std::string& target) {
  HttpResponse response;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return response;
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return response;
  }
  const std::string request = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return response;
  }
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) raw.append(buffer, n);
  close(fd);
  // "HTTP/1.x NNN reason\r\n...\r\n\r\nbody"
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12) return response;
  response.status = std::atoi(raw.c_str() + 9);
  const size_t body = raw.find("\r\n\r\n");
  if (body != std::string::npos) response.body = raw.substr(body + 4);
  return response;
}

}  // namespace tandem::server::testing

#endif  // TANDEM_TESTS_SERVER_GRPC_HTTP_GET_H_
