#include "server/util/heap_trimmer.h"

#include <malloc.h>

namespace tandem::server {

HeapTrimmer::HeapTrimmer(std::chrono::milliseconds period, size_t threshold_bytes)
    : period_(period), threshold_bytes_(threshold_bytes) {
  thread_ = std::thread([this] { Run(); });
}

HeapTrimmer::~HeapTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int64_t HeapTrimmer::trims() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trims_;
}

size_t HeapTrimmer::FreeHeapBytes() {
  // fordblks: free bytes in the arenas' chunks, which is what malloc_trim can give back.
  return mallinfo2().fordblks;
}

void HeapTrimmer::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period_, [this] { return stopping_; })) {
    lock.unlock();
    const bool trimmed = FreeHeapBytes() > threshold_bytes_ && malloc_trim(0) != 0;
    lock.lock();
    if (trimmed) ++trims_;
  }
}

}  // namespace tandem::server
