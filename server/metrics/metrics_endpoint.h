// The HTTP endpoint Prometheus scrapes: GET /metrics on a port of its own, answering with every
// registered collectable in the text exposition format (prometheus-cpp's TextSerializer), over
// our own HttpServer (server/http): scrapes are served concurrently, each within deadlines, so a
// slow or hostile client delays neither other scrapes nor the server's exit; optionally over
// TLS and behind bearer tokens.
//
// Why not prometheus-cpp's pull Exposer: it serves through Debian's civetweb, whose worker
// threads have 100 KB stacks, and in our process libquadmath (OpenBLAS -> libgfortran) registers
// printf types, which sends every printf through glibc's stack-hungry positional path. The
// exposer's first scrape then overflows its thread's stack and kills the server.
#ifndef TANDEM_SERVER_METRICS_METRICS_ENDPOINT_H_
#define TANDEM_SERVER_METRICS_METRICS_ENDPOINT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "server/http/http_server.h"
#include "server/util/bearer_tokens.h"

namespace tandem::server {

struct MetricsEndpointOptions {
  std::string host = "127.0.0.1";
  int port = 9464;                  // 0 picks a free one
  std::shared_ptr<TlsContext> tls;  // null: plain HTTP
  BearerTokens tokens;              // enabled: scrapes must send "Authorization: Bearer <token>"
};

class MetricsEndpoint {
 public:
  // UNAVAILABLE naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const MetricsEndpointOptions& options,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return http_->port(); }

  // The body of GET /metrics.
  std::string Exposition() const;

 private:
  MetricsEndpoint() = default;
  HttpResponse Answer(const HttpRequest& request) const;

  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  BearerTokens tokens_;
  std::unique_ptr<HttpServer> http_;  // last: destroyed (and its threads joined) first
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_METRICS_METRICS_ENDPOINT_H_
