// Gives memory the process freed back to the operating system.
//
// glibc keeps freed memory in its arenas for reuse, and a server whose threads all allocate
// (gRPC's, the engine's, the metrics endpoint's) spreads it over many arenas, of which only the
// top of each can shrink by itself. After a burst (a flood of calls, a huge prompt) the process
// then stays at its peak resident size for ever, although that memory is free. A trimmer thread
// looks every `period` at how much free memory malloc holds and, above `threshold`, asks glibc to
// return it (malloc_trim), so RSS follows the live memory down after a burst.
#ifndef TANDEM_SERVER_UTIL_HEAP_TRIMMER_H_
#define TANDEM_SERVER_UTIL_HEAP_TRIMMER_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tandem::server {

class HeapTrimmer {
 public:
  HeapTrimmer(std::chrono::milliseconds period, size_t threshold_bytes);
  ~HeapTrimmer();  // stops the thread
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  // Times it returned memory so far.
  int64_t trims() const;

  // Free bytes malloc holds now (not returned to the system).
  static size_t FreeHeapBytes();

 private:
  void Run();

  const std::chrono::milliseconds period_;
  const size_t threshold_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int64_t trims_ = 0;
  std::thread thread_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_UTIL_HEAP_TRIMMER_H_
