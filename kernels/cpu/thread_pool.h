// A fixed pool of worker threads for data-parallel loops. The calling thread takes part in every
// loop, so a pool of size n starts n-1 threads, once, at construction; a loop costs a wake-up and
// no allocation. Loops issued from inside a loop body run inline (no nested parallelism), and
// loops issued concurrently from different caller threads are serialised.
#ifndef TANDEM_KERNELS_CPU_THREAD_POOL_H_
#define TANDEM_KERNELS_CPU_THREAD_POOL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::kernels {

class ThreadPool {
 public:
  // threads = total participants including the caller; 0 = std::thread::hardware_concurrency().
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  // Calls fn(task) once for every task in [0, tasks), spread dynamically over the pool.
  template <typename F>
  void Run(int64_t tasks, F&& fn) {
    if (tasks <= 0) return;
    if (tasks == 1 || size_ == 1 || in_pool_) {
      for (int64_t i = 0; i < tasks; ++i) fn(i);
      return;
    }
    RunImpl(
        tasks, [](void* ctx, int64_t i) { (*static_cast<F*>(ctx))(i); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Calls fn(slot, item) once for every item in [0, items); `slot` < size() identifies the
  // participant, so per-slot scratch (allocated once per call) needs no locking.
  template <typename F>
  void ForEach(int64_t items, F&& fn) {
    if (items <= 0) return;
    const int64_t slots = std::min<int64_t>(items, size_);
    std::atomic<int64_t> next{0};
    Run(slots, [&](int64_t slot) {
      for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < items;
           i = next.fetch_add(1, std::memory_order_relaxed)) {
        fn(slot, i);
      }
    });
  }

  // Calls fn(begin, end) on disjoint sub-ranges covering [0, n), each at least `grain` long
  // (except the last), about `tasks_per_thread` ranges per participant.
  template <typename F>
  void ParallelFor(int64_t n, int64_t grain, F&& fn, int tasks_per_thread = 1) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    const int64_t max_tasks = (n + grain - 1) / grain;
    const int64_t tasks = std::min<int64_t>(max_tasks, int64_t{size_} * tasks_per_thread);
    const int64_t step = (n + tasks - 1) / tasks;
    Run(tasks, [&](int64_t i) {
      const int64_t b = i * step, e = std::min(n, b + step);
      if (b < e) fn(b, e);
    });
  }

 private:
  using Call = void (*)(void*, int64_t);
  void RunImpl(int64_t tasks, Call call, void* ctx);
  void WorkerLoop();
  void Drain();

  int size_ = 1;
  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // one loop at a time

  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> busy_{0};  // workers still inside the current loop
  bool stop_ = false;

  Call call_ = nullptr;
  void* ctx_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};

  static thread_local bool in_pool_;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_THREAD_POOL_H_
