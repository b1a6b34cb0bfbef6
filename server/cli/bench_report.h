// The report of `tandem bench`: counts, latency percentiles, throughput and the token hit rate,
// as a table for people or one JSON object for scripts.
#ifndef TANDEM_SERVER_CLI_BENCH_REPORT_H_
#define TANDEM_SERVER_CLI_BENCH_REPORT_H_

#include <string>

#include "nlohmann/json.hpp"
#include "server/cli/bench_recorder.h"
#include "server/cli/bench_runner.h"

namespace tandem::cli {

// What was run, for the report's header.
struct BenchSetup {
  std::string address;
  std::string model;     // the served checkpoint and architecture
  std::string workload;  // BenchWorkload::Describe()
  std::string load;      // e.g. "closed loop, 8 in flight"
};

// Keys: requests, ok, errors, errors_by_code, error_examples, ttft_s, inter_token_s, e2e_s
// (each {p50, p95, p99, mean}), output_tokens, output_tokens_per_s, requests_per_s,
// prompt_tokens, cached_tokens, token_hit_rate, max_in_flight, wall_seconds and the setup.
nlohmann::json BenchReportJson(const BenchSetup& setup, const BenchRecorder& recorder,
                               const LoadResult& load);

std::string BenchReportText(const BenchSetup& setup, const BenchRecorder& recorder,
                            const LoadResult& load);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_BENCH_REPORT_H_
