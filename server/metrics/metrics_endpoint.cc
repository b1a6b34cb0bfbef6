#include "server/metrics/metrics_endpoint.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace tandem::server {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const MetricsEndpointOptions& options,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->collectables_ = std::move(collectables);
  endpoint->tokens_ = options.tokens;
  HttpServerOptions http;
  http.name = "metrics";
  http.host = options.host;
  http.port = options.port;
  http.tls = options.tls;
  // Scrapes are rare (one per Prometheus replica per interval); a handful at once is plenty,
  // and the cap bounds what connection floods can take.
  http.max_connections = 16;
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      http, [e = endpoint.get()](const HttpRequest& request) { return e->Answer(request); });
  if (!server.ok()) return server.status();
  endpoint->http_ = *std::move(server);
  return endpoint;
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

HttpResponse MetricsEndpoint::Answer(const HttpRequest& request) const {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse response = HttpResponse::Text(405, "only GET and HEAD\n");
    response.headers.emplace_back("Allow", "GET, HEAD");
    return response;
  }
  if (tokens_.enabled()) {
    absl::StatusOr<std::string> caller = tokens_.Authenticate(request.Header("authorization"));
    if (!caller.ok()) {
      HttpResponse response =
          HttpResponse::Text(401, absl::StrCat(caller.status().message(), "\n"));
      response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tandem metrics\"");
      return response;
    }
  }
  if (request.path != "/metrics") {
    return HttpResponse::Text(404, "tandem serves its metrics at /metrics\n");
  }
  HttpResponse response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = Exposition();
  return response;
}

}  // namespace tandem::server
