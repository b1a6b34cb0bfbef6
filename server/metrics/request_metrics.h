// What the server observes about each streamed request, as Prometheus histograms and counters:
// latencies (time to first token, inter-token, end to end, queue) and outcomes (by gRPC status
// code and by finish reason). Engine-wide numbers (tokens, memory, cache) are read at scrape
// time instead, by EngineCollector. Thread-safe: observed from gRPC and pump threads at once.
#ifndef TANDEM_SERVER_METRICS_REQUEST_METRICS_H_
#define TANDEM_SERVER_METRICS_REQUEST_METRICS_H_

#include <memory>
#include <string>

#include "engine/request.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem::server {

class RequestMetrics {
 public:
  RequestMetrics();

  // The registry to expose (MetricsEndpoint registers it).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // The gaps before the tokens of one kTokens event of a request whose previous token came at
  // *last_token_seconds (engine time, < 0 before the first; updated here). Several tokens
  // emitted by one engine step count as gaps of 0 after the first.
  void ObserveTokenGaps(const engine::Event& event, double* last_token_seconds);
  // A request that reached the engine and finished (any reason), from its finish event.
  void ObserveFinished(const engine::Event& finished);
  // Every Generate or Chat call when it ends, refused ones included. `code` is the gRPC status
  // code's name, e.g. "OK", "INVALID_ARGUMENT".
  void CountCall(const std::string& rpc, const std::string& code);
  // A stream cancelled because its client read nothing for the stall timeout.
  void CountStreamStall() { stalls_->Increment(); }
  // A connection blocked for resetting calls in a flood (server/grpc/reset_flood_guard.h).
  void CountConnectionBlocked() { blocked_->Increment(); }

 private:
  // A gap between two consecutive output tokens of one request, in seconds.
  void ObserveInterTokenGap(double seconds) { inter_token_->Observe(seconds); }

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* inter_token_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_;
  prometheus::Family<prometheus::Counter>* calls_;
  prometheus::Family<prometheus::Counter>* finished_;
  prometheus::Counter* stalls_;
  prometheus::Counter* blocked_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_METRICS_REQUEST_METRICS_H_
