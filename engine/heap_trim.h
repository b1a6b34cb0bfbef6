// Giving freed heap memory back to the operating system: once the engine has gone quiet, and
// periodically for a whole process (PeriodicHeapTrimmer).
//
// glibc's malloc keeps memory freed by a thread in that thread's arena for reuse, returning
// only the tail of an arena past its trim threshold; a busy engine's loop thread and the α
// tuner's replay threads therefore keep their high-water marks resident while the server
// idles. Measured after the fix to the workspace churn (docs/BENCHMARKS.md, "Memory under
// sustained load"): 25 of the loop arena's 37 MB were free, and malloc_trim returned 16 MB of
// it; before that fix it returned 240 MB.
#ifndef TANDEM_ENGINE_HEAP_TRIM_H_
#define TANDEM_ENGINE_HEAP_TRIM_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tandem::engine {

// Returns the free pages of every malloc arena to the OS (glibc's malloc_trim); true if any
// memory was released. A no-op returning false where the C library has no such call.
bool ReturnFreeHeapToOs();

// Free bytes malloc holds in its arenas now (glibc's mallinfo2().fordblks; 0 elsewhere): what
// ReturnFreeHeapToOs could give back.
size_t FreeHeapBytes();

// For a process whose other threads free memory while the engine may be idle (a server's gRPC
// threads after a flood of calls, a huge prompt refused after tokenizing): a thread that looks
// every `period` at the free heap and, above `threshold_bytes`, returns it to the OS, so RSS
// follows the live memory down after any burst, not only after the engine's own work.
class PeriodicHeapTrimmer {
 public:
  PeriodicHeapTrimmer(std::chrono::milliseconds period, size_t threshold_bytes);
  ~PeriodicHeapTrimmer();  // stops the thread
  PeriodicHeapTrimmer(const PeriodicHeapTrimmer&) = delete;
  PeriodicHeapTrimmer& operator=(const PeriodicHeapTrimmer&) = delete;

  // Times it returned memory so far.
  uint64_t trims() const;

 private:
  void Run();

  const std::chrono::milliseconds period_;
  const size_t threshold_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t trims_ = 0;
  std::thread thread_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_HEAP_TRIM_H_
