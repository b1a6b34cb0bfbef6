// Allocators whose memory is a backing the caller provides (a GPU's, in the engine): the units
// lie inside it, and copies and clears of unit memory go through it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cache/allocator_factory.h"
#include "cache/arena_allocator.h"
#include "cache/memory_backing.h"
#include "tests/cache/host_backing_for_tests.h"

namespace tandem::cache {
namespace {

// Host memory that maps in pieces of `granularity` and counts what is asked of it.
class RecordingBacking final : public testing::HostBackingForTests {
 public:
  RecordingBacking(size_t bytes, size_t granularity)
      : HostBackingForTests((bytes + granularity - 1) / granularity * granularity),
        granularity_(granularity) {}
  size_t granularity() const override { return granularity_; }
  absl::Status Commit(size_t offset, size_t bytes) override {
    committed += bytes;
    return HostBackingForTests::Commit(offset, bytes);
  }
  absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) override {
    ++copies;
    return HostBackingForTests::CopyBytes(dst, src, bytes);
  }
  absl::Status ZeroBytes(std::byte* dst, size_t bytes) override {
    ++clears;
    return HostBackingForTests::ZeroBytes(dst, bytes);
  }
  bool Holds(const std::byte* p, size_t bytes) const {
    return p >= base() && p + bytes <= base() + reserved_bytes();
  }

  size_t committed = 0;
  int copies = 0;
  int clears = 0;

 private:
  size_t granularity_;
};

// A factory that keeps a pointer to what it made, for the test to inspect.
BackingFactory Recording(RecordingBacking** made, size_t granularity) {
  return [made, granularity](size_t bytes) -> absl::StatusOr<std::unique_ptr<MemoryBacking>> {
    auto backing = std::make_unique<RecordingBacking>(bytes, granularity);
    *made = backing.get();
    return backing;
  };
}

TEST(StateBackingTest, AnArenaKeepsBothPoolsInItsBackingCommittedWhole) {
  RecordingBacking* backing = nullptr;
  auto arena = ArenaAllocator::Create(
      {.kv_page_bytes = 1000, .kv_pages = 5, .ssm_block_bytes = 3000, .ssm_blocks = 2},
      Recording(&backing, 4096));
  ASSERT_TRUE(arena.ok()) << arena.status();
  ASSERT_NE(backing, nullptr);
  EXPECT_EQ(backing->committed, backing->reserved_bytes());
  std::byte* units[7];
  for (int i = 0; i < 7; ++i) {
    const Pool pool = i < 5 ? Pool::kKvPage : Pool::kSsmBlock;
    auto h = (*arena)->Allocate(pool);
    ASSERT_TRUE(h.ok());
    units[i] = (*arena)->Resolve(*h);
    EXPECT_TRUE(backing->Holds(units[i], (*arena)->unit_bytes(pool))) << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(units[i]) % 64, 0u) << i;
  }
  for (int i = 1; i < 7; ++i) EXPECT_NE(units[i], units[i - 1]);
  ASSERT_TRUE((*arena)->ZeroBytes(units[5], 3000).ok());
  ASSERT_TRUE((*arena)->CopyBytes(units[6], units[5], 3000).ok());
  EXPECT_EQ(backing->clears, 1);
  EXPECT_EQ(backing->copies, 1);
  EXPECT_EQ(static_cast<int>(units[6][2999]), 0);
}

TEST(StateBackingTest, AnArenaWithoutUnitsAsksForNoMemory) {
  RecordingBacking* backing = nullptr;
  auto arena = ArenaAllocator::Create({}, Recording(&backing, 4096));
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ(backing, nullptr);
}

TEST(StateBackingTest, AFailingFactoryFailsTheAllocatorWithItsError) {
  const BackingFactory refusing = [](size_t) -> absl::StatusOr<std::unique_ptr<MemoryBacking>> {
    return absl::ResourceExhaustedError("GPU 0: out of memory");
  };
  auto arena = ArenaAllocator::Create(
      {.kv_page_bytes = 64, .kv_pages = 1, .ssm_block_bytes = 0, .ssm_blocks = 0}, refusing);
  EXPECT_EQ(arena.status().message(), "GPU 0: out of memory");
  ModelSpec spec;
  spec.name = "attention-only";
  spec.attention = {
      .layers = 1, .input_width = 16, .output_width = 16, .heads = 1, .kv_heads = 1, .head_dim = 8};
  AllocatorOptions options;
  options.budget_bytes = 1 << 20;
  options.make_backing = refusing;
  auto avmp = CreateAllocator("avmp-dynamic", spec, options);
  EXPECT_EQ(avmp.status().message(), "GPU 0: out of memory");
}

// AVMP on a backing that maps 64 KiB at once: its default granule grows to whole pieces of
// that, so committing or returning one granule never touches a neighbour's memory.
TEST(StateBackingTest, AvmpTakesTheBackingAndItsGranularity) {
  ModelSpec spec;
  spec.name = "attention-only";
  spec.attention = {
      .layers = 1, .input_width = 16, .output_width = 16, .heads = 1, .kv_heads = 1, .head_dim = 8};
  RecordingBacking* backing = nullptr;
  AllocatorOptions options;
  options.budget_bytes = 1 << 20;
  options.make_backing = Recording(&backing, 64 << 10);
  auto named = CreateAllocator("avmp-static:1", spec, options);
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_NE(backing, nullptr);
  BlockAllocator& a = *named->allocator;
  auto page = a.Allocate(Pool::kKvPage);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(backing->Holds(a.Resolve(*page), a.unit_bytes(Pool::kKvPage)));
  EXPECT_EQ(backing->committed, size_t{64} << 10);  // one granule, one backing piece
  ASSERT_TRUE(a.ZeroBytes(a.Resolve(*page), 64).ok());
  EXPECT_EQ(backing->clears, 1);

  // The baselines map their host range once and never commit: they cannot use one.
  for (const std::string name : {"fixed-dual:1", "padded-unified"}) {
    auto refused = CreateAllocator(name, spec, options);
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(refused.status().message()).find("avmp-static"), std::string::npos)
        << refused.status();
  }
}

}  // namespace
}  // namespace tandem::cache
