#include "kernels/cpu/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TANDEM_CPU_RELAX() _mm_pause()
#else
#define TANDEM_CPU_RELAX() ((void)0)
#endif

namespace tandem::kernels {

thread_local bool ThreadPool::in_pool_ = false;

namespace {
// Spin this many rounds (a pause is ~40-140 cycles: some microseconds in all) before sleeping:
// short enough not to steal a shared core for long, long enough that back-to-back decode ops do
// not each pay a futex wake-up. 4000 rounds measured 10× worse loop overhead on a loaded
// 2-core machine (BM_ThreadPoolRun).
constexpr int kSpinRounds = 256;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  size_ = std::max(threads, 1);
  workers_.reserve(size_ - 1);
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Drain() {
  for (;;) {
    const int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= tasks_) return;
    call_(ctx_, i);
  }
}

void ThreadPool::RunImpl(int64_t tasks, Call call, void* ctx) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    call_ = call;
    ctx_ = ctx;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  in_pool_ = true;
  Drain();
  in_pool_ = false;
  for (int spin = 0; spin < kSpinRounds; ++spin) {
    if (busy_.load(std::memory_order_acquire) == 0) return;
    TANDEM_CPU_RELAX();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return busy_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::WorkerLoop() {
  in_pool_ = true;
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinRounds; ++spin) {
      TANDEM_CPU_RELAX();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    Drain();
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_all();
    }
  }
}

}  // namespace tandem::kernels
