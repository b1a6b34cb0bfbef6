// PeriodicHeapTrimmer gives freed heap back to the OS when malloc holds more free memory than
// its threshold, and leaves a heap with little free memory alone.
#include "engine/heap_trim.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/address_sanitizer.h"

namespace tandem::engine {
namespace {

#if TANDEM_ADDRESS_SANITIZER
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Allocates `bytes` in small blocks on a thread of its own (so in an arena of its own, as a
// server's gRPC threads do) and frees all but every 64th: the survivors pin the arena, so the
// freed blocks stay in malloc (its own trimming only gives back a free top of the heap).
std::vector<std::unique_ptr<char[]>> ChurnOnAnotherThread(size_t bytes) {
  std::vector<std::unique_ptr<char[]>> pinned;
  std::thread([bytes, &pinned] {
    std::vector<std::unique_ptr<char[]>> blocks;
    for (size_t made = 0; made < bytes; made += 4096) {
      blocks.emplace_back(new char[4096]);
      blocks.back()[0] = 1;  // touch it, so it is resident
    }
    for (size_t i = 0; i < blocks.size(); i += 64) pinned.push_back(std::move(blocks[i]));
  }).join();
  return pinned;
}

uint64_t WaitForTrims(const PeriodicHeapTrimmer& trimmer, uint64_t n) {
  for (int i = 0; i < 1000 && trimmer.trims() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return trimmer.trims();
}

TEST(PeriodicHeapTrimmerTest, ReturnsFreedHeapAboveTheThreshold) {
  if (kSanitized) GTEST_SKIP() << "AddressSanitizer's allocator replaces malloc's arenas";
  std::vector<std::unique_ptr<char[]>> pinned = ChurnOnAnotherThread(64 << 20);
  ASSERT_GT(FreeHeapBytes(), size_t{16} << 20);
  PeriodicHeapTrimmer trimmer(std::chrono::milliseconds(10), 16 << 20);
  EXPECT_GE(WaitForTrims(trimmer, 1), 1u);
}

TEST(PeriodicHeapTrimmerTest, LeavesASmallFreeHeapAlone) {
  // Far above anything this test process frees.
  PeriodicHeapTrimmer trimmer(std::chrono::milliseconds(5), size_t{1} << 40);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(trimmer.trims(), 0u);
}

}  // namespace
}  // namespace tandem::engine
