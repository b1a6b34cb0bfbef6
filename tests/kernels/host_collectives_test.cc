// The CPU's tensor-parallel collectives (kernels/cpu/host_collectives.h): workers on threads add
// their buffers together, every worker ending with the same bits, call after call; and the norm
// spread over workers (Ops::RowSquareSums / RmsNormBySums) equals the whole row's RmsNorm.
#include "kernels/cpu/host_collectives.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "kernels/backends.h"
#include "kernels/reference/reference_ops.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::Rng;

TEST(HostCollectivesTest, EveryWorkerGetsTheSumInRankOrder) {
  for (int32_t ranks : {1, 2, 3, 4}) {
    HostCollectiveGroup group(ranks);
    // Counts below, at and above the worker count, and none at all; repeated back to back.
    const std::vector<int64_t> counts = {1, 2, 5, 0, 1000, 3, 777};
    Rng rng(ranks);
    std::vector<std::vector<std::vector<float>>> inputs(counts.size());
    for (size_t call = 0; call < counts.size(); ++call) {
      for (int32_t r = 0; r < ranks; ++r) {
        inputs[call].push_back(rng.Uniform(static_cast<size_t>(counts[call]), -1e3f, 1e3f));
      }
    }
    std::vector<std::vector<std::vector<float>>> results(counts.size(),
                                                         std::vector<std::vector<float>>(ranks));
    auto worker = [&](int32_t r) {
      Collectives& c = group.member(r);
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.ranks(), ranks);
      for (size_t call = 0; call < counts.size(); ++call) {
        std::vector<float> data = inputs[call][r];
        c.AllReduceSum(data.data(), counts[call]);
        results[call][r] = data;
      }
    };
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < ranks; ++r) threads.emplace_back(worker, r);
    for (std::thread& t : threads) t.join();
    for (size_t call = 0; call < counts.size(); ++call) {
      std::vector<float> want = inputs[call][0];
      for (int32_t r = 1; r < ranks; ++r) {
        for (size_t i = 0; i < want.size(); ++i) want[i] += inputs[call][r][i];
      }
      for (int32_t r = 0; r < ranks; ++r) {
        ASSERT_EQ(results[call][r].size(), want.size());
        if (want.empty()) continue;
        EXPECT_EQ(std::memcmp(results[call][r].data(), want.data(), want.size() * sizeof(float)), 0)
            << ranks << " workers, call " << call << ", worker " << r;
      }
    }
  }
}

TEST(HostCollectivesTest, AnAbortedGroupStopsWaitingAndCanBeReset) {
  HostCollectiveGroup group(3);
  std::vector<float> a = {1, 2}, b = {10, 20};
  // Worker 2 never comes: worker 0 and 1 wait until the abort, their buffers untouched.
  std::thread first([&] { group.member(0).AllReduceSum(a.data(), 2); });
  std::thread second([&] { group.member(1).AllReduceSum(b.data(), 2); });
  while (group.waiting() < 2) std::this_thread::yield();
  group.Abort();
  first.join();
  second.join();
  EXPECT_TRUE(group.aborted());
  EXPECT_EQ(a, (std::vector<float>{1, 2}));
  group.member(2).AllReduceSum(a.data(), 2);  // returns at once
  group.Reset();
  EXPECT_FALSE(group.aborted());
  std::vector<float> c = {100, 200};
  std::thread t0([&] { group.member(0).AllReduceSum(a.data(), 2); });
  std::thread t1([&] { group.member(1).AllReduceSum(b.data(), 2); });
  group.member(2).AllReduceSum(c.data(), 2);
  t0.join();
  t1.join();
  EXPECT_EQ(a, (std::vector<float>{111, 222}));
  EXPECT_EQ(b, a);
  EXPECT_EQ(c, a);
}

TEST(SplitRmsNormTest, PartsNormalisedByTheirSummedSquaresAreTheWholeRow) {
  Rng rng(5);
  for (auto& ops : {MakeReferenceOps(), MakeCpuOps(1)}) {
    const int64_t rows = 3, dim = 96, ld = 101;
    const std::vector<float> x = rng.Uniform(rows * ld, -2, 2), w = rng.Uniform(dim);
    std::vector<float> want(rows * ld, 0.0f);
    ReferenceOps().RmsNorm(x.data(), ld, rows, dim, w.data(), 1e-5f, want.data(), ld);
    // Three workers of 32 channels each.
    std::vector<float> got = x, sums(rows, 0.0f), part(rows);
    for (int64_t p = 0; p < 3; ++p) {
      ops->RowSquareSums(got.data() + p * 32, ld, rows, 32, part.data());
      for (int64_t r = 0; r < rows; ++r) sums[r] += part[r];
    }
    for (int64_t p = 0; p < 3; ++p) {
      ops->RmsNormBySums(got.data() + p * 32, ld, rows, 32, sums.data(), dim, w.data() + p * 32,
                         1e-5f);
    }
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(AllClose(got.data() + r * ld, want.data() + r * ld, dim, 1e-6f, 1e-6f))
          << ops->name() << " row " << r;
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
