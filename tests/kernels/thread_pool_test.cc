#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace tandem::kernels {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 7, 1000}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
          EXPECT_LT(b, e);
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain;
      }
    }
  }
}

TEST(ThreadPoolTest, ForEachSlotsAreExclusive) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> in_use(pool.size());
  std::atomic<int> done{0};
  pool.ForEach(500, [&](int64_t slot, int64_t) {
    ASSERT_LT(slot, pool.size());
    EXPECT_EQ(in_use[slot].fetch_add(1), 0);
    done.fetch_add(1);
    in_use[slot].fetch_sub(1);
  });
  EXPECT_EQ(done.load(), 500);
}

TEST(ThreadPoolTest, NestedLoopsRunInline) {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  pool.ParallelFor(6, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(10, 1,
                       [&](int64_t b2, int64_t e2) { total.fetch_add(static_cast<int>(e2 - b2)); });
    }
  });
  EXPECT_EQ(total.load(), 60);
}

TEST(ThreadPoolTest, ManyBackToBackLoops) {
  ThreadPool pool(2);
  int64_t sum = 0;
  std::vector<int64_t> part(2);
  for (int it = 0; it < 20000; ++it) {
    pool.Run(2, [&](int64_t i) { part[i] = i + 1; });
    sum += part[0] + part[1];
  }
  EXPECT_EQ(sum, 20000 * 3);
}

}  // namespace
}  // namespace tandem::kernels
