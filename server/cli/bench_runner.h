// The load loop of `tandem bench`: issues a workload's requests as Generate calls over gRPC's
// callback API and records each one. One thread (the caller's) decides when to send; gRPC's
// threads only record chunks and hand finished calls back, so hundreds of streams need no thread
// each. Failures are recorded, never fatal.
//
// Pacing:
//  * closed loop: `concurrency` calls in flight; each finished call frees its slot for the next
//    (after a failed call the slot rests kFailureBackoff first, so that a server that refuses
//    everything is probed rather than flooded with instant retries);
//  * Poisson: requests arrive at `rate` per second (open loop: arrivals do not wait for answers);
//  * the workload's clock: a trace's timestamps (open loop).
// Sending stops after `duration_seconds` or `max_requests` (whichever comes first) or when the
// workload runs out; calls in flight then finish and are counted.
#ifndef TANDEM_SERVER_CLI_BENCH_RUNNER_H_
#define TANDEM_SERVER_CLI_BENCH_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "server/cli/bench_recorder.h"
#include "server/cli/bench_workload.h"
#include "server/client/connection.h"

namespace tandem::cli {

inline constexpr std::chrono::milliseconds kFailureBackoff{50};

struct LoadOptions {
  enum class Pacing { kClosedLoop, kPoisson, kWorkloadClock };
  Pacing pacing = Pacing::kClosedLoop;
  int64_t concurrency = 8;  // closed loop
  double rate = 1;          // Poisson: requests per second
  std::optional<double> duration_seconds;
  std::optional<int64_t> max_requests;
  uint64_t seed = 1;  // Poisson arrivals, and each request's sampling seed (seed + index)
  float temperature = 0;
  bool ignore_eos = true;  // every request generates its full max_new_tokens
  std::chrono::milliseconds request_timeout{300'000};
  // When set, every call carries this gRPC metadata header with its request's session id, so
  // that a proxy in front of several replicas can keep a conversation on one of them.
  std::string session_header;
};

struct LoadResult {
  int64_t sent = 0;
  int64_t max_in_flight = 0;
  double wall_seconds = 0;  // from the first send to the last call's end
};

LoadResult RunLoad(const client::Connection& connection, BenchWorkload& workload,
                   const LoadOptions& options, BenchRecorder& recorder);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_BENCH_RUNNER_H_
