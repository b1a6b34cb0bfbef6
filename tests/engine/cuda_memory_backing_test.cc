// The AVMP allocator on GPU memory (engine/cuda_memory_backing.h): KV pages and SSM blocks
// resolve to device addresses that hold data, capacity migrates between the pools by remapping,
// and granules that do not cover whole VMM pieces are refused. Built with CUDA only; skips
// without a device.
#ifdef TANDEM_HAVE_CUDA

#include "engine/cuda_memory_backing.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "cache/avmp_allocator.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::engine {
namespace {

using cache::AvmpAllocator;
using cache::AvmpConfig;
using cache::Pool;

TEST(CudaMemoryBackingTest, AvmpPoolsLiveInDeviceMemory) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto probe = CreateCudaMemoryBacking(0, 1);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const size_t g = (*probe)->granularity();
  AvmpConfig c;
  c.kv_page_bytes = g / 8;
  c.ssm_block_bytes = g / 2;
  c.granule_bytes = g;
  c.budget_bytes = 8 * g;
  auto backing = CreateCudaMemoryBacking(0, c.budget_bytes);
  ASSERT_TRUE(backing.ok()) << backing.status();
  std::byte* const base = (*backing)->base();
  auto avmp = AvmpAllocator::Create(c, *std::move(backing));
  ASSERT_TRUE(avmp.ok()) << avmp.status();

  // Fill the KV pool, writing a distinct byte into each page from the host through the device.
  std::vector<cache::Handle> pages;
  while (true) {
    auto page = (*avmp)->Allocate(Pool::kKvPage);
    if (!page.ok()) break;
    pages.push_back(*page);
  }
  ASSERT_FALSE(pages.empty());
  for (size_t i = 0; i < pages.size(); ++i) {
    std::byte* p = (*avmp)->Resolve(pages[i]);
    ASSERT_GE(p, base);
    ASSERT_LT(p, base + 8 * g);
    const std::vector<unsigned char> fill(c.kv_page_bytes, static_cast<unsigned char>(i));
    ASSERT_CUDA_OK(cudaMemcpy(p, fill.data(), fill.size(), cudaMemcpyHostToDevice));
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    std::vector<unsigned char> back(c.kv_page_bytes);
    ASSERT_CUDA_OK(cudaMemcpy(back.data(), (*avmp)->Resolve(pages[i]), back.size(),
                              cudaMemcpyDeviceToHost));
    ASSERT_EQ(back, std::vector<unsigned char>(back.size(), static_cast<unsigned char>(i)));
  }
  // Freed KV capacity moves to SSM blocks, which are device memory that reads back too.
  for (auto page : pages) (*avmp)->Free(page);
  std::vector<cache::Handle> blocks;
  for (int i = 0; i < 12; ++i) {
    auto block = (*avmp)->Allocate(Pool::kSsmBlock);
    if (!block.ok()) break;
    blocks.push_back(*block);
  }
  ASSERT_FALSE(blocks.empty());
  const std::vector<unsigned char> ones(c.ssm_block_bytes, 1);
  ASSERT_CUDA_OK(cudaMemcpy((*avmp)->Resolve(blocks.back()), ones.data(), ones.size(),
                            cudaMemcpyHostToDevice));
  for (auto block : blocks) (*avmp)->Free(block);
}

TEST(CudaMemoryBackingTest, GranulesSmallerThanTheVmmPieceAreRefused) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto backing = CreateCudaMemoryBacking(0, 64 << 20);
  ASSERT_TRUE(backing.ok()) << backing.status();
  AvmpConfig c;
  c.kv_page_bytes = 64 << 10;
  c.ssm_block_bytes = 256 << 10;
  c.granule_bytes = 1 << 20;
  c.budget_bytes = 64 << 20;
  auto avmp = AvmpAllocator::Create(c, *std::move(backing));
  ASSERT_FALSE(avmp.ok());
  EXPECT_EQ(avmp.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaMemoryBackingTest, AMissingDeviceIsAPreconditionError) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto backing = CreateCudaMemoryBacking(1 << 20, 1);
  ASSERT_FALSE(backing.ok());
  EXPECT_EQ(backing.status().code(), absl::StatusCode::kFailedPrecondition) << backing.status();
}

}  // namespace
}  // namespace tandem::engine

#endif  // TANDEM_HAVE_CUDA
