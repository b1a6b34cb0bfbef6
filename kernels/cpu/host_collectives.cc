#include "kernels/cpu/host_collectives.h"

#include <algorithm>

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

HostCollectiveGroup::HostCollectiveGroup(int32_t ranks)
    : published_(static_cast<size_t>(std::max(ranks, 1))),
      sums_(static_cast<size_t>(std::max(ranks, 1))) {
  for (int32_t r = 0; r < std::max(ranks, 1); ++r) {
    members_.push_back(std::make_unique<Member>(*this, r));
  }
}

HostCollectiveGroup::~HostCollectiveGroup() = default;

Collectives& HostCollectiveGroup::member(int32_t rank) { return *members_[rank]; }

bool HostCollectiveGroup::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) return false;
  const uint64_t generation = generation_;
  if (++waiting_ == ranks()) {
    waiting_ = 0;
    ++generation_;
    arrived_.notify_all();
    return true;
  }
  arrived_.wait(lock, [&] { return generation_ != generation || aborted_; });
  return generation_ != generation;
}

void HostCollectiveGroup::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  arrived_.notify_all();
}

bool HostCollectiveGroup::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

int32_t HostCollectiveGroup::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

void HostCollectiveGroup::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = false;
  waiting_ = 0;
}

void HostCollectiveGroup::AllReduceSum(int32_t rank, float* data, int64_t count) {
  const int64_t n = ranks();
  if (n == 1 || count <= 0) return;
  auto share_begin = [&](int64_t r) { return count * r / n; };
  published_[rank] = data;
  if (!Wait()) return;  // every buffer is published
  const int64_t begin = share_begin(rank), end = share_begin(rank + 1);
  std::vector<float>& sums = sums_[rank];
  sums.assign(published_[0] + begin, published_[0] + end);
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
