// What `tandem bench` sends: Generate requests with token-id prompts, from generated multi-turn
// sessions or from a request trace. Prompts use the same token functions as `tandem
// bench-engine` (workload_tokens.h), so both benches replay the same workload.
#ifndef TANDEM_SERVER_CLI_BENCH_WORKLOAD_H_
#define TANDEM_SERVER_CLI_BENCH_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/trace.h"

namespace tandem::cli {

struct BenchRequest {
  std::vector<int32_t> prompt;
  int32_t max_new_tokens = 1;
  // Which conversation this turn belongs to: a generated session, a session trace's session_id,
  // or a Mooncake request's line (each its own session).
  uint64_t session = 0;
};

// Not thread-safe: the load runner's one thread calls it.
class BenchWorkload {
 public:
  virtual ~BenchWorkload() = default;
  // No request is left (a trace's end). Sessions never run out.
  virtual bool Exhausted() const = 0;
  // Seconds from the start at which the next request arrives, for a workload with its own
  // clock (a trace); nullopt when the load runner sets the pace.
  virtual std::optional<double> NextArrival() const { return std::nullopt; }
  // The next request; only when !Exhausted().
  virtual BenchRequest Next() = 0;
  // How a request from Next() ended, with the tokens the server generated (for sessions, the
  // next turn's prompt contains them).
  virtual void Finished(const BenchRequest& request, bool ok, const std::vector<int32_t>& output) {}
  // One line for the report, e.g. "sessions: system 256 + 4 turns × (user 64, output 32)".
  virtual std::string Describe() const = 0;
};

// Multi-turn chat sessions sharing one system prompt: turn t's prompt is the conversation so far
// (system, earlier user turns and the server's real answers) plus `user_tokens` new tokens.
// Next() continues the longest-waiting session whose answer came back, or starts a new one. A
// session ends after `turns` turns, after a failed turn, or when its next prompt would exceed
// max_prompt_tokens.
struct SessionWorkloadOptions {
  uint64_t seed = 1;
  size_t turns = 4;
  size_t system_tokens = 256;
  size_t user_tokens = 64;
  int32_t max_new_tokens = 32;
};
absl::StatusOr<std::unique_ptr<BenchWorkload>> MakeSessionWorkload(
    const SessionWorkloadOptions& options, int32_t vocab, size_t max_prompt_tokens);

// A trace's requests in order, each arriving at its timestamp × time_scale. Prompts keep their
// first max_prompt_tokens tokens; outputs are the trace's lengths capped at max_new_tokens.
struct TraceWorkloadOptions {
  double time_scale = 1;
  int32_t max_new_tokens = 32;
};
absl::StatusOr<std::unique_ptr<BenchWorkload>> MakeTraceWorkload(
    cache::Trace trace, const TraceWorkloadOptions& options, int32_t vocab,
    size_t max_prompt_tokens);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_BENCH_WORKLOAD_H_
