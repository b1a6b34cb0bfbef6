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
    : barrier_(std::max(ranks, 1)),
      published_(static_cast<size_t>(std::max(ranks, 1))),
      sums_(static_cast<size_t>(std::max(ranks, 1))) {
  for (int32_t r = 0; r < std::max(ranks, 1); ++r) {
    members_.push_back(std::make_unique<Member>(*this, r));
  }
}

HostCollectiveGroup::~HostCollectiveGroup() = default;

Collectives& HostCollectiveGroup::member(int32_t rank) { return *members_[rank]; }

void HostCollectiveGroup::AllReduceSum(int32_t rank, float* data, int64_t count) {
  const int64_t n = ranks();
  if (n == 1 || count <= 0) return;
  auto share_begin = [&](int64_t r) { return count * r / n; };
  published_[rank] = data;
  barrier_.arrive_and_wait();  // every buffer is published
  const int64_t begin = share_begin(rank), end = share_begin(rank + 1);
  std::vector<float>& sums = sums_[rank];
  sums.assign(published_[0] + begin, published_[0] + end);
  for (int64_t r = 1; r < n; ++r) {
    const float* from = published_[r] + begin;
    for (int64_t i = 0; i < end - begin; ++i) sums[i] += from[i];
  }
  barrier_.arrive_and_wait();  // every share is summed; nobody reads the buffers any more
  for (int64_t r = 0; r < n; ++r) {
    std::copy(sums_[r].begin(), sums_[r].end(), data + share_begin(r));
  }
  // The next call's first wait keeps the shares alive until every worker has copied them.
}

}  // namespace tandem::kernels
