// Seeded synthetic workloads.
//
// Multi-turn chat/agent traces shaped like Marconi's, as token streams:
//   lmsys, sharegpt — sessions of ≥ 10 turns; session i starts at i / sessions_per_second; the
//                     next turn arrives after the previous response plus a typing delay of
//                     words / (90 wpm / 60) (one word ≈ 1.3 tokens);
//   swebench        — agent trajectories of up to 50 turns: a long first prompt (system + issue),
//                     then environment observations; turn gaps are Poisson(avg response time).
// Each turn's prompt is the whole conversation so far plus the new user (or observation)
// tokens; sessions share no tokens with each other. Sessions stop before the context exceeds
// max_context tokens. Length distributions are log-normal fits to the paper's description;
// where the paper gives no number we chose one (see docs/CACHE_RESULTS.md).
//
// Allocator workloads shaped like AVMP's, as (prompt, generation, arrival tick):
//   uniform_short, mixed_long, agentic_burst, sharegpt_replay.
#ifndef TANDEM_CACHE_WORKLOADS_H_
#define TANDEM_CACHE_WORKLOADS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/trace.h"

namespace tandem::cache {

struct WorkloadOptions {
  uint64_t seed = 42;
  size_t sessions = 100;
  double sessions_per_second = 1.0;
  double avg_response_time_s = 7.5;  // swebench
  size_t max_context = 32768;
};

std::vector<std::string> SessionWorkloadNames();  // lmsys, sharegpt, swebench
// Requests ordered by arrival. INVALID_ARGUMENT for an unknown name.
absl::StatusOr<Trace> GenerateSessionWorkload(const std::string& name,
                                              const WorkloadOptions& options);

struct AllocRequest {
  size_t prompt_tokens = 0;
  size_t gen_tokens = 0;
  uint64_t arrival_tick = 0;  // one tick = one decode step
};

std::vector<std::string> AllocWorkloadNames();
// Requests ordered by arrival tick. INVALID_ARGUMENT for an unknown name.
absl::StatusOr<std::vector<AllocRequest>> GenerateAllocWorkload(const std::string& name,
                                                                uint64_t seed);

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_WORKLOADS_H_
