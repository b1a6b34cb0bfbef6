// Drives a real Engine with a workload, the way clients would: a generated multi-turn chat
// workload (closed loop: each turn's prompt is the conversation so far, including what the model
// really answered) or a request trace replayed at its timestamps (open loop). Records each
// request's time to first token as a client sees it. Used by `tandem bench-engine`.
#ifndef TANDEM_SERVER_CLI_ENGINE_REPLAY_H_
#define TANDEM_SERVER_CLI_ENGINE_REPLAY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/trace.h"
#include "engine/engine.h"
#include "server/cli/quantile.h"

namespace tandem::cli {

struct MultiTurnWorkload {
  uint64_t seed = 1;
  size_t sessions = 8;
  size_t turns = 4;
  size_t system_tokens = 256;  // a system prompt every session starts with
  size_t user_tokens = 64;     // new tokens per user turn
  size_t output_tokens = 16;   // generated per turn
  double sessions_per_second = 0.5;
  double think_seconds = 1.0;  // between an answer and the next user turn
};

struct TraceReplayOptions {
  size_t max_requests = 64;
  size_t max_prompt_tokens = 2048;  // longer prompts keep their first tokens
  size_t max_output_tokens = 32;
  double time_scale = 1.0;  // multiplies the trace's arrival times
  size_t clients = 32;      // concurrent client threads
};

struct RequestRecord {
  double ttft_seconds = 0;
  double e2e_seconds = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  bool ok = false;
};

struct ReplayResult {
  std::vector<RequestRecord> records;
  double wall_seconds = 0;
  engine::SchedulerStats stats;
};

absl::StatusOr<ReplayResult> ReplayMultiTurn(engine::Engine& engine,
                                             const MultiTurnWorkload& workload);
absl::StatusOr<ReplayResult> ReplayTrace(engine::Engine& engine, const cache::Trace& trace,
                                         const TraceReplayOptions& options);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_ENGINE_REPLAY_H_
