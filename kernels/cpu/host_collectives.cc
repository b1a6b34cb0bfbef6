#include "kernels/cpu/host_collectives.h"

#include <algorithm>
#include <thread>

namespace tandem::kernels {

class HostCollectiveGroup::Member final : public Collectives {
 public:
  Member(HostCollectiveGroup& group, int32_t rank) : group_(group), rank_(rank) {}
  int32_t rank() const override { return rank_; }
  int32_t ranks() const override { return group_.ranks(); }
  void AllReduceSum(float* data, int64_t count) override {
    group_.AllReduceSum(rank_, data, count);
  }

 private:
  HostCollectiveGroup& group_;
  const int32_t rank_;
};

HostCollectiveGroup::HostCollectiveGroup(int32_t ranks, int spins)
    : spins_(spins),
      published_(static_cast<size_t>(std::max(ranks, 1))),
      sums_(static_cast<size_t>(std::max(ranks, 1))) {
  for (int32_t r = 0; r < std::max(ranks, 1); ++r) {
    members_.push_back(std::make_unique<Member>(*this, r));
  }
}

HostCollectiveGroup::~HostCollectiveGroup() = default;

Collectives& HostCollectiveGroup::member(int32_t rank) { return *members_[rank]; }

bool HostCollectiveGroup::Wait() {
  if (aborted_.load(std::memory_order_acquire)) return false;
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (arrivals_.fetch_add(1, std::memory_order_acq_rel) + 1 == ranks()) {
    // The last to arrive releases the others; the count is ready for the next wait first.
    arrivals_.store(0, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);  // a sleeper cannot miss the change
      generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    arrived_.notify_all();
    return true;
  }
  for (int spin = 0; spin < spins_; ++spin) {
    if (generation_.load(std::memory_order_acquire) != generation) return true;
    if (aborted_.load(std::memory_order_acquire)) {
      return generation_.load(std::memory_order_acquire) != generation;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }
  std::unique_lock<std::mutex> lock(mu_);
  arrived_.wait(lock, [&] {
    return generation_.load(std::memory_order_acquire) != generation ||
           aborted_.load(std::memory_order_acquire);
  });
  return generation_.load(std::memory_order_acquire) != generation;
}

void HostCollectiveGroup::Abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.store(true, std::memory_order_release);
  }
  arrived_.notify_all();
}

bool HostCollectiveGroup::aborted() const { return aborted_.load(std::memory_order_acquire); }

int32_t HostCollectiveGroup::waiting() const { return arrivals_.load(std::memory_order_acquire); }

void HostCollectiveGroup::Reset() {
  aborted_.store(false, std::memory_order_release);
  arrivals_.store(0, std::memory_order_release);
}

void HostCollectiveGroup::AllReduceSum(int32_t rank, float* data, int64_t count) {
  const int64_t n = ranks();
  if (n == 1 || count <= 0) return;
  auto share_begin = [&](int64_t r) { return count * r / n; };
  published_[rank] = data;
  if (!Wait()) return;  // every buffer is published
  const int64_t begin = share_begin(rank), end = share_begin(rank + 1);
  std::vector<float>& sums = sums_[rank];
  try {
    sums.assign(published_[0] + begin, published_[0] + end);
  } catch (...) {
    // No memory for this share. The others are reading every buffer: let them finish (an empty
    // share copies nothing), then abort the pass and fail as the worker's own op would.
    sums.clear();
    Wait();
    Abort();
    throw;
  }
  for (int64_t r = 1; r < n; ++r) {
    const float* from = published_[r] + begin;
    for (int64_t i = 0; i < end - begin; ++i) sums[i] += from[i];
  }
  if (!Wait()) return;  // every share is summed; nobody reads the buffers any more
  for (int64_t r = 0; r < n; ++r) {
    std::copy(sums_[r].begin(), sums_[r].end(), data + share_begin(r));
  }
  // The next call's first wait keeps the shares alive until every worker has copied them.
}

}  // namespace tandem::kernels
