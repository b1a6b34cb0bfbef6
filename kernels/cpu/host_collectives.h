// Collectives between workers that are threads of one process, over host memory: the CPU's
// tensor parallelism, and the reference the device collectives are checked against.
#ifndef TANDEM_KERNELS_CPU_HOST_COLLECTIVES_H_
#define TANDEM_KERNELS_CPU_HOST_COLLECTIVES_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/collectives.h"

namespace tandem::kernels {

class HostCollectiveGroup {
 public:
  // A waiting worker checks `spins` times (a pause instruction between checks: from a few µs to
  // ~100 µs in all, by CPU) whether the others have arrived before it sleeps.
  static constexpr int kDefaultSpins = 2000;
  explicit HostCollectiveGroup(int32_t ranks, int spins = kDefaultSpins);
  HostCollectiveGroup(const HostCollectiveGroup&) = delete;
  HostCollectiveGroup& operator=(const HostCollectiveGroup&) = delete;
  ~HostCollectiveGroup();

  int32_t ranks() const { return static_cast<int32_t>(members_.size()); }
  // Worker `rank`'s end, to be used by one thread at a time.
  Collectives& member(int32_t rank);

  // A worker that cannot finish its pass (its scratch memory ran out, say), and is not inside
  // a collective, aborts the group (a collective that cannot allocate aborts it itself):
  // nobody waits for anybody any more, every collective returns at once with its buffer
  // unsummed, and the pass's results are garbage for the caller to discard. Reset() makes the
  // group usable again, once every worker has left the pass.
  void Abort();
  bool aborted() const;
  void Reset();
  // Workers waiting for the others right now (diagnostics and tests).
  int32_t waiting() const;

 private:
  class Member;
  // Each worker sums its share of the elements over every worker's buffer (published between
  // the two waits), then copies every share back into its own buffer: the work is split, the
  // order of each sum is fixed.
  void AllReduceSum(int32_t rank, float* data, int64_t count);
  // Until every worker has arrived (true), or the group is aborted (false). Spins a while
  // before it sleeps: a layer's workers arrive within microseconds of each other, and waking a
  // sleeping thread costs tens of them (docs/BENCHMARKS.md, "Tensor parallelism").
  bool Wait();

  const int spins_;
  std::atomic<int32_t> arrivals_{0};
  std::atomic<uint64_t> generation_{0};  // how many waits every worker has finished
  std::atomic<bool> aborted_{false};
  std::mutex mu_;  // for the sleepers
  std::condition_variable arrived_;
  std::vector<float*> published_;
  std::vector<std::vector<float>> sums_;  // per worker: its share of the sums
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_HOST_COLLECTIVES_H_
