#include "server/metrics/request_metrics.h"

#include <vector>

namespace tandem::server {
namespace {

// Buckets span what a CPU deployment sees (milliseconds per token, seconds to minutes per
// request) as well as a GPU one.
const prometheus::Histogram::BucketBoundaries& FirstTokenBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160};
  return b;
}
const prometheus::Histogram::BucketBoundaries& InterTokenBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5};
  return b;
}
const prometheus::Histogram::BucketBoundaries& RequestBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {0.05, 0.1, 0.25, 0.5, 1,   2.5, 5,
                                                            10,   20,  40,   80,  160, 320, 640};
  return b;
}

prometheus::Histogram* AddHistogram(prometheus::Registry& registry, const std::string& name,
                                    const std::string& help,
                                    const prometheus::Histogram::BucketBoundaries& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

}  // namespace

RequestMetrics::RequestMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  ttft_ = AddHistogram(*registry_, "tandem_time_to_first_token_seconds",
                       "Seconds from a request's arrival at the engine to its first output token.",
                       FirstTokenBuckets());
  inter_token_ = AddHistogram(*registry_, "tandem_inter_token_latency_seconds",
                              "Seconds between consecutive output tokens of one request.",
                              InterTokenBuckets());
  e2e_ = AddHistogram(*registry_, "tandem_e2e_request_latency_seconds",
                      "Seconds from a request's arrival at the engine until it finished.",
                      RequestBuckets());
  queue_ = AddHistogram(*registry_, "tandem_queue_time_seconds",
                        "Seconds a request waited before it was first admitted to the batch.",
                        FirstTokenBuckets());
  calls_ = &prometheus::BuildCounter()
                .Name("tandem_requests_total")
                .Help(
                    "Generate and Chat calls (and the OpenAI API's ChatCompletions and "
                    "Completions) by method and final gRPC status code.")
                .Register(*registry_);
  finished_ = &prometheus::BuildCounter()
                   .Name("tandem_requests_finished_total")
                   .Help("Requests that ran in the engine, by finish reason.")
                   .Register(*registry_);
  stalls_ = &prometheus::BuildCounter()
                 .Name("tandem_stream_stalls_total")
                 .Help(
                     "Streams cancelled because their client read nothing for the stall "
                     "timeout.")
                 .Register(*registry_)
                 .Add({});
  blocked_ = &prometheus::BuildCounter()
                  .Name("tandem_connections_blocked_total")
                  .Help(
                      "Connections whose new calls were refused for a while because their "
                      "client reset calls in a flood.")
                  .Register(*registry_)
                  .Add({});
}

void RequestMetrics::ObserveTokenGaps(const engine::Event& event, double* last_token_seconds) {
  if (event.tokens.empty()) return;
  // Tokens of one event were emitted by one step: the first carries the gap, the rest 0.
  if (*last_token_seconds >= 0) ObserveInterTokenGap(event.seconds - *last_token_seconds);
  for (size_t i = 1; i < event.tokens.size(); ++i) ObserveInterTokenGap(0);
  *last_token_seconds = event.seconds;
}

void RequestMetrics::ObserveFinished(const engine::Event& finished) {
  finished_->Add({{"reason", engine::FinishReasonName(finished.finish_reason)}}).Increment();
  const engine::Timings& t = finished.timings;
  // A request cancelled or failed before admission has no queue time, and one that produced no
  // token has no first-token time: observing zeros would drag the quantiles down.
  if (t.queued > 0 || finished.usage.completion_tokens > 0) queue_->Observe(t.queued);
  if (finished.usage.completion_tokens > 0) ttft_->Observe(t.first_token);
  e2e_->Observe(t.finished);
}

void RequestMetrics::CountCall(const std::string& rpc, const std::string& code) {
  calls_->Add({{"rpc", rpc}, {"code", code}}).Increment();
}

}  // namespace tandem::server
