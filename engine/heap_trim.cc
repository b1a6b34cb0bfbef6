#include "engine/heap_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tandem::engine {

bool ReturnFreeHeapToOs() {
#if defined(__GLIBC__)
  return malloc_trim(0) != 0;
#else
  return false;
#endif
}

size_t FreeHeapBytes() {
#if defined(__GLIBC__)
  return mallinfo2().fordblks;
#else
  return 0;
#endif
}

PeriodicHeapTrimmer::PeriodicHeapTrimmer(std::chrono::milliseconds period, size_t threshold_bytes)
    : period_(period), threshold_bytes_(threshold_bytes) {
  thread_ = std::thread([this] { Run(); });
}

PeriodicHeapTrimmer::~PeriodicHeapTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t PeriodicHeapTrimmer::trims() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trims_;
}

void PeriodicHeapTrimmer::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period_, [this] { return stopping_; })) {
    lock.unlock();
    const bool trimmed = FreeHeapBytes() > threshold_bytes_ && ReturnFreeHeapToOs();
    lock.lock();
    if (trimmed) ++trims_;
  }
}

}  // namespace tandem::engine
