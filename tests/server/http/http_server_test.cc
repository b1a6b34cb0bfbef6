// Our HTTP server keeps one client from degrading the others: a client that trickles its request
// a byte at a time neither blocks a concurrent request nor holds its connection past the request
// deadline; connections beyond the cap are refused at once with 503; stopping the server does
// not wait for idle clients; malformed requests get the right status; TLS works with the
// operator's certificate and refuses a wrong key at load time; request bodies are read within
// their cap (413 beyond, 411 without a length, 501 chunked), streamed responses reach the
// client piece by piece, and kept-alive connections carry several requests and close when idle.
#include "server/http/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/server/http_test_client.h"

namespace tandem::server {
namespace {

using testing::ConnectLoopback;
using testing::HttpExchange;
using testing::HttpGet;

std::string Fixture(const std::string& path) { return std::string(TANDEM_TEST_DATA) + "/" + path; }

std::unique_ptr<HttpServer> StartServer(HttpServerOptions options = {}) {
  options.port = 0;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, [](const HttpRequest& request) {
        return HttpResponse::Text(200, "hello " + request.path + "\n");
      });
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// Sends a request head one byte every 100 ms until the server closes the connection or answers,
// or `max_bytes` were sent; returns what the server sent back.
class Trickler {
 public:
  Trickler(int port, size_t max_bytes) {
    thread_ = std::thread([this, port, max_bytes] {
      const int fd = ConnectLoopback(port, 1);
      const std::string slow = "GET /slow HTTP/1.1\r\nX-Filler: " + std::string(max_bytes, 'x');
      for (size_t i = 0; i < max_bytes && fd >= 0; ++i) {
        if (send(fd, &slow[i], 1, MSG_NOSIGNAL) != 1) break;
        char buffer[512];
        const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
        if (n == 0) break;
        if (n > 0) {
          answer_.append(buffer, n);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (fd >= 0) close(fd);
      trickling_ = false;
    });
  }
  ~Trickler() {
    if (thread_.joinable()) thread_.join();
  }
  bool trickling() const { return trickling_; }
  // After it stopped.
  const std::string& answer() const { return answer_; }
  void Join() {
    thread_.join();
    thread_ = std::thread();
  }

 private:
  std::atomic<bool> trickling_{true};
  std::string answer_;
  std::thread thread_;
};

TEST(HttpServerTest, ATricklingClientDelaysNobody) {
  HttpServerOptions options;
  options.request_timeout = std::chrono::minutes(2);  // the trickler outlasts the test
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  Trickler slow(server->port(), 600);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it is connected and trickling
  for (int i = 0; i < 5; ++i) {
    testing::HttpResponse response = HttpGet(server->port(), "/metrics");
    EXPECT_EQ(response.status, 200);
    EXPECT_EQ(response.body, "hello /metrics\n");
  }
  // All five were answered while the slow client was still sending its head.
  EXPECT_TRUE(slow.trickling());
  server.reset();  // which ends the trickler's connection
}

TEST(HttpServerTest, ATricklingClientIsCutOffAtTheRequestDeadline) {
  HttpServerOptions options;
  options.request_timeout = std::chrono::milliseconds(500);
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  // It would take 30 s to send its head; the server answers 408 well before.
  Trickler slow(server->port(), 300);
  slow.Join();
  EXPECT_EQ(testing::ParseHttpResponse(slow.answer()).status, 408) << slow.answer();
}

TEST(HttpServerTest, ConnectionsBeyondTheCapAreRefusedAtOnce) {
  HttpServerOptions options;
  options.max_connections = 2;
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  const int idle_a = ConnectLoopback(server->port());
  const int idle_b = ConnectLoopback(server->port());
  ASSERT_GE(idle_a, 0);
  ASSERT_GE(idle_b, 0);
  while (server->active_connections() < 2) std::this_thread::yield();
  EXPECT_EQ(HttpGet(server->port(), "/").status, 503);
  close(idle_a);
  close(idle_b);
  while (server->active_connections() > 0) std::this_thread::yield();
  EXPECT_EQ(HttpGet(server->port(), "/").status, 200);
}

TEST(HttpServerTest, StoppingDoesNotWaitForIdleClients) {
  HttpServerOptions options;
  options.request_timeout = std::chrono::hours(1);  // only the stop can end these
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  const int idle = ConnectLoopback(server->port());
  ASSERT_GE(idle, 0);
  while (server->active_connections() < 1) std::this_thread::yield();
  server.reset();  // returns: the connection's thread was interrupted, not waited for
  char byte;
  EXPECT_EQ(recv(idle, &byte, 1, 0), 0);  // and the client sees the connection closed
  close(idle);
}

TEST(HttpServerTest, MalformedRequestsGetTheirStatus) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(HttpExchange(server->port(), "NONSENSE\r\n\r\n").status, 400);
  EXPECT_EQ(HttpExchange(server->port(), "GET / HTTP/2.0\r\n\r\n").status, 505);
  EXPECT_EQ(HttpExchange(server->port(), "GET / HTTP/1.1\r\nno colon here\r\n\r\n").status, 400);
  EXPECT_EQ(
      HttpExchange(server->port(), "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").status,
      400);
  EXPECT_EQ(HttpExchange(server->port(),
                         "GET / HTTP/1.1\r\nX-Big: " + std::string(20000, 'y') + "\r\n\r\n")
                .status,
            431);
  // HEAD: the headers of GET, no body.
  testing::HttpResponse head = HttpExchange(server->port(), "HEAD /x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(head.head.find("Content-Length: 9"), std::string::npos) << head.head;
  EXPECT_TRUE(head.body.empty());
}

TEST(HttpServerTest, ServesTlsWithTheOperatorsCertificate) {
  absl::StatusOr<std::shared_ptr<TlsContext>> tls =
      TlsContext::Load(Fixture("tls/server.crt"), Fixture("tls/server.key"));
  ASSERT_TRUE(tls.ok()) << tls.status();
  HttpServerOptions options;
  options.tls = *tls;
  options.request_timeout = std::chrono::milliseconds(2000);
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  testing::HttpResponse response =
      testing::HttpsGet(server->port(), "/metrics", Fixture("tls/server.crt"));
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "hello /metrics\n");
  // Plaintext gets no HTTP answer from a TLS port.
  EXPECT_EQ(HttpGet(server->port(), "/metrics").status, 0);
}

std::unique_ptr<HttpServer> StartEchoServer(HttpServerOptions options) {
  options.port = 0;
  options.max_body_bytes = 16;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, [](const HttpRequest& request, HttpResponseWriter& writer) {
        if (request.path == "/stream") {
          HttpResponse head;
          head.content_type = "text/event-stream";
          if (!writer.StartStream(head).ok()) return;
          for (int i = 0; i < 3; ++i) {
            if (!writer.Write("data: " + std::to_string(i) + "\n\n").ok()) return;
          }
          return;
        }
        (void)writer.Send(HttpResponse::Text(200, "got " + request.body));
      });
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(HttpServerTest, BodiesAreReadWithinTheirCap) {
  HttpServerOptions options;
  options.error_response = [](int status, const std::string& message) {
    return HttpResponse::Text(status, "refused: " + message);
  };
  std::unique_ptr<HttpServer> server = StartEchoServer(options);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  testing::HttpResponse ok =
      HttpExchange(port, "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "got hello");
  testing::HttpResponse large =
      HttpExchange(port, "POST /x HTTP/1.1\r\nContent-Length: 17\r\n\r\n" + std::string(17, 'z'));
  EXPECT_EQ(large.status, 413);
  EXPECT_EQ(large.body,
            "refused: the request body is 17 bytes, more than the server's limit of 16");
  EXPECT_EQ(HttpExchange(port, "POST /x HTTP/1.1\r\n\r\n").status, 411);
  EXPECT_EQ(HttpExchange(port,
                         "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5\r\nhello\r\n0\r\n\r\n")
                .status,
            501);
  EXPECT_EQ(HttpExchange(port, "POST /x HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello").status, 400);
  EXPECT_EQ(HttpExchange(port,
                         "POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6"
                         "\r\n\r\nhello!")
                .status,
            400);
}

TEST(HttpServerTest, AClientThatExpectsContinueHearsIt) {
  std::unique_ptr<HttpServer> server = StartEchoServer({});
  ASSERT_NE(server, nullptr);
  const int fd = ConnectLoopback(server->port());
  ASSERT_GE(fd, 0);
  const std::string head = "POST /x HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
  std::string received(go_on.size(), '\0');
  ASSERT_EQ(recv(fd, received.data(), received.size(), MSG_WAITALL),
            static_cast<ssize_t>(go_on.size()));
  EXPECT_EQ(received, go_on);
  ASSERT_EQ(send(fd, "hi", 2, MSG_NOSIGNAL), 2);
  std::string raw;
  char buffer[512];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) raw.append(buffer, n);
  close(fd);
  EXPECT_EQ(testing::ParseHttpResponse(raw).body, "got hi");
}

// Everything the server sent back, responses one after the other.
std::string RawExchange(int port, const std::string& request) {
  testing::HttpResponse response = HttpExchange(port, request);
  return response.head + "\r\n\r\n" + response.body;
}

TEST(HttpServerTest, KeptAliveConnectionsCarryRequestsInTurn) {
  HttpServerOptions options;
  options.keep_alive = true;
  options.max_requests_per_connection = 3;
  std::unique_ptr<HttpServer> server = StartEchoServer(options);
  ASSERT_NE(server, nullptr);
  // Pipelined: a body, a request right behind it, then one that asks to close.
  const std::string raw = RawExchange(server->port(),
                                      "POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\none"
                                      "POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\ntwo"
                                      "POST /x HTTP/1.1\r\nContent-Length: 5\r\n"
                                      "Connection: close\r\n\r\nthree");
  EXPECT_NE(raw.find("Connection: keep-alive\r\n\r\ngot oneHTTP/1.1 200 OK"), std::string::npos)
      << raw;
  EXPECT_NE(raw.find("got twoHTTP/1.1 200 OK"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Connection: close"), std::string::npos) << raw;
  // The third request is the last one allowed, asked or not; HTTP/1.0 closes unless asked.
  const std::string capped = RawExchange(server->port(),
                                         "POST /x HTTP/1.1\r\nContent-Length: 1\r\n\r\na"
                                         "POST /x HTTP/1.1\r\nContent-Length: 1\r\n\r\nb"
                                         "POST /x HTTP/1.1\r\nContent-Length: 1\r\n\r\nc"
                                         "POST /x HTTP/1.1\r\nContent-Length: 1\r\n\r\nd");
  EXPECT_NE(capped.find("got c"), std::string::npos) << capped;
  EXPECT_EQ(capped.find("got d"), std::string::npos) << capped;
  EXPECT_EQ(HttpGet(server->port(), "/stream").status, 200);  // HTTP/1.0: closed after it
}

TEST(HttpServerTest, AnIdleKeptAliveConnectionIsClosed) {
  HttpServerOptions options;
  options.keep_alive = true;
  options.keep_alive_idle = std::chrono::milliseconds(100);
  std::unique_ptr<HttpServer> server = StartEchoServer(options);
  ASSERT_NE(server, nullptr);
  // One request, then silence: the server closes the connection once the idle time is over
  // (HttpExchange reads until it does).
  testing::HttpResponse response =
      HttpExchange(server->port(), "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "got hi");
}

TEST(HttpServerTest, AShortBodyIsCutOffAtTheRequestDeadline) {
  HttpServerOptions options;
  options.request_timeout = std::chrono::milliseconds(300);
  std::unique_ptr<HttpServer> server = StartEchoServer(options);
  ASSERT_NE(server, nullptr);
  // Promises 10 bytes, sends 2, then waits for the answer.
  EXPECT_EQ(HttpExchange(server->port(), "POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nhi").status,
            408);
}

TEST(HttpServerTest, StreamedBodiesEndWithTheConnection) {
  std::unique_ptr<HttpServer> server = StartEchoServer({});
  ASSERT_NE(server, nullptr);
  testing::HttpResponse response = HttpGet(server->port(), "/stream");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.head.find("Content-Length"), std::string::npos) << response.head;
  EXPECT_EQ(response.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST(TlsContextTest, BadFilesAreErrorsNamingTheFile) {
  absl::StatusOr<std::shared_ptr<TlsContext>> missing =
      TlsContext::Load("/nonexistent/server.crt", Fixture("tls/server.key"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/server.crt"), std::string::npos);
  absl::StatusOr<std::shared_ptr<TlsContext>> not_pem =
      TlsContext::Load(Fixture("tls/README.md"), Fixture("tls/server.key"));
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("no PEM certificate"), std::string::npos)
      << not_pem.status();
  absl::StatusOr<std::shared_ptr<TlsContext>> key_as_cert =
      TlsContext::Load(Fixture("tls/server.crt"), Fixture("tls/server.crt"));
  ASSERT_FALSE(key_as_cert.ok());
  EXPECT_NE(key_as_cert.status().message().find("no PEM private key"), std::string::npos)
      << key_as_cert.status();
}

}  // namespace
}  // namespace tandem::server
