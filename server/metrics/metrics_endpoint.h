// The HTTP endpoint Prometheus scrapes: GET /metrics on a port of its own, answering with every
// registered collectable in the text exposition format (prometheus-cpp's TextSerializer).
//
// Why not prometheus-cpp's pull Exposer: it serves through Debian's civetweb, whose worker
// threads have 100 KB stacks, and in our process libquadmath (OpenBLAS -> libgfortran) registers
// printf types, which sends every printf through glibc's stack-hungry positional path. The
// exposer's first scrape then overflows its thread's stack and kills the server. This endpoint
// is a small single-threaded HTTP/1.0 responder on a normal thread: scrapes are rare and tiny.
#ifndef TANDEM_SERVER_METRICS_METRICS_ENDPOINT_H_
#define TANDEM_SERVER_METRICS_METRICS_ENDPOINT_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace tandem::server {

class MetricsEndpoint {
 public:
  // Listens on host:port (an IPv4 or IPv6 literal or a name; port 0 picks a free one).
  // UNAVAILABLE naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& host, int port,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  ~MetricsEndpoint();  // stops listening and joins the thread
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }

  // The body of GET /metrics.
  std::string Exposition() const;

 private:
  MetricsEndpoint() = default;
  void Serve();
  void Answer(int connection) const;

  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // written by the destructor to end Serve()
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_METRICS_METRICS_ENDPOINT_H_
