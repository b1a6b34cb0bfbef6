#include "cache/alpha_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

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

std::vector<double> AlphaTuner::ReplayGrid(const PrefixCache& snapshot,
                                           const std::vector<std::vector<TokenId>>& prompts,
                                           const std::vector<std::vector<TokenId>>& outputs,
                                           const std::vector<double>& grid, int threads) {
  std::vector<double> saved(grid.size(), 0);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t g = next++; g < grid.size(); g = next++) {
      // Each replay gets its own allocator, so the copies share nothing.
      CountingAllocator alloc(snapshot.allocator_unit_bytes(Pool::kKvPage),
                              snapshot.allocator_unit_bytes(Pool::kSsmBlock));
      std::unique_ptr<PrefixCache> cache = snapshot.Clone(&alloc);
      cache->set_alpha(grid[g]);
      const double before = cache->stats().flops_saved;
      for (size_t i = 0; i < prompts.size(); ++i) {
        (void)RunRequest(*cache, alloc, prompts[i], outputs[i]);
      }
      saved[g] = cache->stats().flops_saved - before;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return saved;
}

void AlphaTuner::StartWindow(const std::string& reason) {
  reason_ = reason;
  snapshot_alloc_ = std::make_unique<CountingAllocator>(
      cache_->allocator_unit_bytes(Pool::kKvPage), cache_->allocator_unit_bytes(Pool::kSsmBlock));
  snapshot_ = cache_->Clone(snapshot_alloc_.get());
  prompts_.clear();
  outputs_.clear();
  state_ = State::kLogging;
}

void AlphaTuner::Launch() {
  state_ = State::kReplaying;
  done_ = false;
  auto job = [this] {
    const auto start = std::chrono::steady_clock::now();
    saved_ = ReplayGrid(*snapshot_, prompts_, outputs_, config_.grid, config_.threads);
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
  // Strictly greater: among equals the smaller α wins.
  size_t best = 0;
  for (size_t g = 1; g < saved_.size(); ++g) {
    if (saved_[g] > saved_[best]) best = g;
  }
  cache_->set_alpha(config_.grid[best]);
  events_.push_back(
      {reason_, requests_, prompts_.size(), config_.grid[best], saved_[best], replay_seconds_});
  snapshot_.reset();
  snapshot_alloc_.reset();
  prompts_.clear();
  outputs_.clear();
  prompts_.shrink_to_fit();
  outputs_.shrink_to_fit();
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
        StartWindow("first eviction");
      }
      return;
    case State::kLogging:
      prompts_.emplace_back(prompt.begin(), prompt.end());
      outputs_.emplace_back(output.begin(), output.end());
      if (prompts_.size() >= window_size_) Launch();
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
