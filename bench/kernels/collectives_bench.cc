// What an all-reduce between tensor-parallel worker threads costs (kernels/cpu/host_collectives.h):
// every sub-layer of a split model pays one, so its latency at a decode batch's size is the
// overhead a split adds per layer. Args: workers, floats summed (rows × hidden), and how many
// times a waiting worker checks before it sleeps (0: it sleeps at once, on a condition variable).
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>
#include <vector>

#include "kernels/cpu/host_collectives.h"

namespace tandem::kernels {
namespace {

void BM_HostAllReduce(benchmark::State& state) {
  const int32_t workers = static_cast<int32_t>(state.range(0));
  const int64_t count = state.range(1);
  HostCollectiveGroup group(workers, static_cast<int>(state.range(2)));
  std::atomic<bool> stop{false};
  std::vector<std::vector<float>> buffers(workers, std::vector<float>(count, 1.0f));
  std::vector<std::thread> others;
  for (int32_t r = 1; r < workers; ++r) {
    others.emplace_back([&, r] {
      while (!stop.load(std::memory_order_acquire)) {
        group.member(r).AllReduceSum(buffers[r].data(), count);
      }
    });
  }
  for (auto _ : state) {
    // The sums double each call and soon reach inf, which adds as fast as any finite value
    // (only subnormals are slow).
    group.member(0).AllReduceSum(buffers[0].data(), count);
  }
  // The others may be waiting inside a call the lead will not join: release them.
  stop.store(true, std::memory_order_release);
  group.Abort();
  for (std::thread& t : others) t.join();
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * count * sizeof(float) * workers,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_HostAllReduce)
    ->ArgsProduct({{2}, {4096, 64 * 4096, 512 * 4096}, {0, HostCollectiveGroup::kDefaultSpins}})
    ->UseRealTime();

}  // namespace
}  // namespace tandem::kernels
