// Engine-wide metrics read at scrape time: token and request counters, memory per pool, the
// prefix cache and its α. The engine keeps these as cumulative statistics already, so reading
// them when Prometheus asks costs nothing per token and can never drift from GetServerInfo.
#ifndef TANDEM_SERVER_METRICS_ENGINE_COLLECTOR_H_
#define TANDEM_SERVER_METRICS_ENGINE_COLLECTOR_H_

#include <functional>
#include <vector>

#include "engine/scheduler.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace tandem::server {

// What the collector reads on each scrape.
struct EngineSnapshot {
  engine::SchedulerStats stats;
  int64_t active_streams = 0;  // open Generate/Chat calls
  bool draining = false;
  // Times freed heap went back to the OS: the engine's own when it went quiet, and the
  // server's periodic trimmer's.
  uint64_t heap_trims = 0;
  // Structured output's and forced tool calls' compiled grammars (engine/grammar_cache.h).
  int64_t grammar_hits = 0;
  int64_t grammar_compiles = 0;
  size_t grammar_entries = 0;
  size_t grammar_bytes = 0;
};

class EngineCollector : public prometheus::Collectable {
 public:
  // `snapshot` is called on the metrics endpoint's thread; it must be thread-safe.
  explicit EngineCollector(std::function<EngineSnapshot()> snapshot)
      : snapshot_(std::move(snapshot)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<EngineSnapshot()> snapshot_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_METRICS_ENGINE_COLLECTOR_H_
