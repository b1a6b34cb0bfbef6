#include "cache/alpha_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "cache/request_runner.h"

namespace tandem::cache {

AlphaTuner::AlphaTuner(const TunerConfig& config, PrefixCache* cache)
    : config_(config), cache_(cache) {
  if (config_.grid.empty()) config_.grid = {0.0};
  cache_->set_first_eviction_callback([this] { evicted_ = true; });
}

AlphaTuner::~AlphaTuner() {
  if (worker_.joinable()) worker_.join();
  cache_->set_first_eviction_callback(nullptr);
}

absl::StatusOr<std::vector<double>> AlphaTuner::ReplayGrid(
    const PrefixCache& snapshot, const std::vector<std::vector<TokenId>>& prompts,
    const std::vector<std::vector<TokenId>>& outputs, const std::vector<double>& grid, int threads,
    size_t capacity_bytes) {
  std::vector<double> saved(grid.size(), 0);
  std::vector<absl::Status> failures(grid.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t g = next++; g < grid.size(); g = next++) {
      // Each replay gets its own allocator, so the copies share nothing.
      CountingAllocator alloc(snapshot.allocator_unit_bytes(Pool::kKvPage),
                              snapshot.allocator_unit_bytes(Pool::kSsmBlock));
      absl::StatusOr<std::unique_ptr<PrefixCache>> copy = snapshot.Clone(&alloc);
      if (!copy.ok()) {
        failures[g] = copy.status();
        continue;
      }
      std::unique_ptr<PrefixCache> cache = *std::move(copy);
      cache->set_alpha(grid[g]);
      if (capacity_bytes > 0) cache->set_capacity_bytes(capacity_bytes);
      const double before = cache->stats().flops_saved;
      for (size_t i = 0; i < prompts.size(); ++i) {
        absl::StatusOr<RequestOutcome> outcome = RunRequest(*cache, alloc, prompts[i], outputs[i]);
        // A request that does not fit is part of the replay (it saves nothing); any other
        // refusal means the copy of the tree is broken and its count means nothing.
        if (!outcome.ok() && !absl::IsResourceExhausted(outcome.status())) {
          failures[g] = outcome.status();
          break;
        }
      }
      saved[g] = cache->stats().flops_saved - before;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t g = 0; g < grid.size(); ++g) {
    if (!failures[g].ok()) {
      return absl::InternalError(
          absl::StrCat("replay for alpha ", grid[g], ": ", failures[g].message()));
    }
  }
  return saved;
}

void AlphaTuner::StartWindow(const std::string& reason) {
  reason_ = reason;
  snapshot_alloc_ = std::make_unique<CountingAllocator>(
      cache_->allocator_unit_bytes(Pool::kKvPage), cache_->allocator_unit_bytes(Pool::kSsmBlock));
  // A counting allocator has no limit, so the copy cannot fail; if it ever did, the replay
  // reports it (no snapshot) and α is kept.
  absl::StatusOr<std::unique_ptr<PrefixCache>> snapshot = cache_->Clone(snapshot_alloc_.get());
  snapshot_ = snapshot.ok() ? *std::move(snapshot) : nullptr;
  snapshot_error_ = snapshot.status();
  // The replayed copies hold what this tree holds: its configured capacity, or (an engine's
  // tree, bounded only by the allocator) what it held when memory ran out. A copy without a
  // bound would never evict, so every α would score the same.
  replay_capacity_ = cache_->config().capacity_bytes > 0 ? cache_->config().capacity_bytes
                                                         : std::max<size_t>(cache_->bytes(), 1);
  prompts_.clear();
  outputs_.clear();
  logged_tokens_ = 0;
  state_ = State::kLogging;
}

void AlphaTuner::Launch() {
  state_ = State::kReplaying;
  done_ = false;
  auto job = [this] {
    const auto start = std::chrono::steady_clock::now();
    saved_ = snapshot_ == nullptr ? absl::StatusOr<std::vector<double>>(snapshot_error_)
                                  : ReplayGrid(*snapshot_, prompts_, outputs_, config_.grid,
                                               config_.threads, replay_capacity_);
    replay_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done_ = true;
  };
  if (config_.synchronous) {
    job();
    Apply();
  } else {
    worker_ = std::thread(job);
  }
}

void AlphaTuner::Apply() {
  if (worker_.joinable()) worker_.join();
  AlphaTuning event{reason_, requests_, prompts_.size(), cache_->alpha(), 0, replay_seconds_, ""};
  if (saved_.ok()) {
    // Strictly greater: among equals the smaller α wins.
    const std::vector<double>& saved = *saved_;
    size_t best = 0;
    for (size_t g = 1; g < saved.size(); ++g) {
      if (saved[g] > saved[best]) best = g;
    }
    cache_->set_alpha(config_.grid[best]);
    event.alpha = config_.grid[best];
    event.flops_saved = saved[best];
  } else {
    event.error = std::string(saved_.status().message());  // α stays as it was
  }
  events_.push_back(std::move(event));
  ++tunings_;
  while (events_.size() > std::max<size_t>(config_.max_events, 1)) events_.pop_front();
  snapshot_.reset();
  snapshot_alloc_.reset();
  saved_ = std::vector<double>{};
  prompts_.clear();
  outputs_.clear();
  prompts_.shrink_to_fit();
  outputs_.shrink_to_fit();
  logged_tokens_ = 0;
  rate_at_tuning_ = recent_input_ == 0 ? 0 : double(recent_hit_) / double(recent_input_);
  since_tuning_ = 0;
  state_ = State::kSteady;
}

void AlphaTuner::Wait() {
  if (state_ == State::kReplaying) Apply();
}

void AlphaTuner::OnRequest(absl::Span<const TokenId> prompt, absl::Span<const TokenId> output,
                           size_t hit_tokens) {
  ++requests_;
  ++since_tuning_;
  if (config_.drift_window > 0) {
    recent_.push_back({prompt.size(), hit_tokens});
    recent_input_ += prompt.size();
    recent_hit_ += hit_tokens;
    if (recent_.size() > config_.drift_window) {
      recent_input_ -= recent_.front().first;
      recent_hit_ -= recent_.front().second;
      recent_.pop_front();
    }
  }
  switch (state_) {
    case State::kWaiting:
      if (evicted_) {
        // The window is k × the requests served before the first eviction (this one excluded).
        const size_t before = std::max<size_t>(1, requests_ - 1);
        window_size_ = std::max<size_t>(
            {1, static_cast<size_t>(std::ceil(config_.bootstrap_multiplier * double(before))),
             config_.min_window_requests});
        window_size_ = std::min(window_size_, std::max<size_t>(config_.max_window_requests, 1));
        StartWindow("first eviction");
      }
      return;
    case State::kLogging:
      prompts_.emplace_back(prompt.begin(), prompt.end());
      outputs_.emplace_back(output.begin(), output.end());
      logged_tokens_ += prompt.size() + output.size();
      if (prompts_.size() >= window_size_ || logged_tokens_ >= config_.max_window_tokens) {
        Launch();
      }
      return;
    case State::kReplaying:
      if (done_) Apply();
      return;
    case State::kSteady: {
      if (config_.drift_window == 0 || config_.drift_threshold <= 0) return;
      if (since_tuning_ < config_.drift_window || recent_.size() < config_.drift_window) return;
      const double rate = recent_input_ == 0 ? 0 : double(recent_hit_) / double(recent_input_);
      if (std::abs(rate - rate_at_tuning_) > config_.drift_threshold) {
        StartWindow("hit rate drift");
      }
      return;
    }
  }
}

}  // namespace tandem::cache
