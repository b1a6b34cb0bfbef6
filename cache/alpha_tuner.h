// Online tuning of the FLOP-aware eviction weight α (Marconi §4.3, plus re-tuning).
//
// α stays 0 until the cache's first eviction. Then the tuner snapshots the tree, logs the next
// k × (requests served before that eviction) requests (the bootstrap window) and replays them
// on copies of the snapshot, one per α of the grid, on worker threads; the α that saves the
// most prefill FLOPs over the window is adopted (ties: the smaller α). Beyond the paper: the
// window holds at least min_window_requests requests, because when the first eviction comes
// after a handful of requests (a small cache) k× that handful is too few requests for the
// FLOPs of the 21 replays to rank α reliably. Also beyond the paper: once
// tuned, the tuner watches the token hit rate over a sliding window and re-tunes (new snapshot,
// new window of the same size) when it drifts from the rate seen at the last tuning. Every
// tuning is recorded as an event.
//
// The tuner is driven from the thread that owns the cache (OnRequest after each request). In
// asynchronous mode the replays run on a background thread and the result is applied at a later
// OnRequest; in synchronous mode (simulations) the replay runs inside the OnRequest that
// completes the window, so results are deterministic.
#ifndef TANDEM_CACHE_ALPHA_TUNER_H_
#define TANDEM_CACHE_ALPHA_TUNER_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cache/counting_allocator.h"
#include "cache/prefix_cache.h"

namespace tandem::cache {

struct TunerConfig {
  double bootstrap_multiplier = 5;
  std::vector<double> grid = {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
                              1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0};
  int threads = 2;
  bool synchronous = false;
  // Re-tune when the token hit rate over the last drift_window requests differs from the rate
  // at the last tuning by more than drift_threshold (absolute). 0 disables re-tuning.
  size_t drift_window = 200;
  double drift_threshold = 0.15;
  // Beyond the paper: the bootstrap window is max(k × requests seen, this). 0 = the paper's.
  size_t min_window_requests = 100;
  // Beyond the paper: bounds on what a window logs. k × the requests seen grows with how long
  // a server ran before its first eviction (a large memory can take thousands of requests),
  // and every logged request keeps its prompt and output, so an unbounded window made the
  // tuner's memory grow with uptime. The window closes (and the replay starts) at whichever
  // bound it reaches first; the replay's copies of the tree are bounded by the tree's size.
  size_t max_window_requests = 2000;
  size_t max_window_tokens = size_t{4} << 20;  // prompt + output ids logged: 16 MiB
  size_t max_events = 64;                      // tunings kept in events(); tunings() counts all
};

struct AlphaTuning {
  std::string reason;       // "first eviction" or "hit rate drift"
  size_t at_request = 0;    // requests seen when α was adopted
  size_t window = 0;        // requests replayed
  double alpha = 0;         // adopted
  double flops_saved = 0;   // by that α over the window
  double wall_seconds = 0;  // the grid replay
  std::string error;        // non-empty: the replay failed (a broken invariant) and α was kept
};

class AlphaTuner {
 public:
  // Installs the cache's first-eviction callback. `cache` must outlive the tuner.
  AlphaTuner(const TunerConfig& config, PrefixCache* cache);
  ~AlphaTuner();  // waits for a running replay
  AlphaTuner(const AlphaTuner&) = delete;
  AlphaTuner& operator=(const AlphaTuner&) = delete;

  // After each request has been inserted (or aborted): its tokens and the prompt tokens that
  // were served from the cache.
  void OnRequest(absl::Span<const TokenId> prompt, absl::Span<const TokenId> output,
                 size_t hit_tokens);

  // The latest max_events tunings, oldest first.
  const std::deque<AlphaTuning>& events() const { return events_; }
  // Tunings since the tuner started (adopted or failed), including those events() dropped.
  size_t tunings() const { return tunings_; }
  // Prompt and output ids the current window has logged (bounded by max_window_tokens).
  size_t logged_tokens() const { return logged_tokens_; }
  bool busy() const { return state_ == State::kLogging || state_ == State::kReplaying; }
  // Blocks until an asynchronous replay finishes and applies it (tests, shutdown).
  void Wait();

  // FLOPs each α of `grid` saves replaying `log` on copies of `snapshot` (exposed for tests),
  // each copy holding at most `capacity_bytes` (0: the snapshot's own capacity). INTERNAL if a
  // replayed request was refused for anything but memory (a broken invariant of the tree).
  static absl::StatusOr<std::vector<double>> ReplayGrid(
      const PrefixCache& snapshot, const std::vector<std::vector<TokenId>>& prompts,
      const std::vector<std::vector<TokenId>>& outputs, const std::vector<double>& grid,
      int threads, size_t capacity_bytes = 0);

 private:
  enum class State { kWaiting, kLogging, kReplaying, kSteady };
  void StartWindow(const std::string& reason);
  void Launch();
  void Apply();

  TunerConfig config_;
  PrefixCache* cache_;
  State state_ = State::kWaiting;
  bool evicted_ = false;
  size_t requests_ = 0;
  size_t window_size_ = 0;
  std::string reason_;
  std::unique_ptr<CountingAllocator> snapshot_alloc_;
  std::unique_ptr<PrefixCache> snapshot_;
  absl::Status snapshot_error_;  // why snapshot_ is null
  std::vector<std::vector<TokenId>> prompts_, outputs_;
  std::thread worker_;
  size_t logged_tokens_ = 0;
  size_t replay_capacity_ = 0;  // bytes each replayed copy of the tree may hold
  std::atomic<bool> done_{false};
  absl::StatusOr<std::vector<double>> saved_;
  double replay_seconds_ = 0;
  // Drift detection: (input tokens, hit tokens) of recent requests.
  std::deque<std::pair<size_t, size_t>> recent_;
  size_t recent_input_ = 0, recent_hit_ = 0;
  double rate_at_tuning_ = 0;
  size_t since_tuning_ = 0;
  std::deque<AlphaTuning> events_;
  size_t tunings_ = 0;
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_ALPHA_TUNER_H_
