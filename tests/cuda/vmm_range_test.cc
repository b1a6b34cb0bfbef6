// VmmRange (kernels/cuda/vmm_range.h) on a real device: granule rounding, mapping and unmapping
// pieces of the range, fresh memory reading as zero, contents surviving a re-map of mapped
// granules, and bad ranges refused by name. Skips without a CUDA device.
#include "kernels/cuda/vmm_range.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/cuda/cuda_test_util.h"

namespace tandem::kernels::cuda {
namespace {

std::vector<uint8_t> Read(const VmmRange& range, size_t offset, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), static_cast<uint8_t*>(range.base()) + offset, bytes,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

void Write(const VmmRange& range, size_t offset, const std::vector<uint8_t>& bytes) {
  ASSERT_EQ(cudaMemcpy(static_cast<uint8_t*>(range.base()) + offset, bytes.data(), bytes.size(),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
}

TEST(VmmRangeTest, MapsUnmapsAndRemapsZeroedGranules) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  std::string error;
  // The granularity first, from a one-byte range.
  const auto probe = VmmRange::Create(0, 1, &error);
  ASSERT_NE(probe, nullptr) << error;
  const size_t g = probe->granularity();
  ASSERT_GT(g, 0u);
  auto range = VmmRange::Create(0, 3 * g + 1, &error);
  ASSERT_NE(range, nullptr) << error;
  EXPECT_EQ(range->reserved_bytes(), 4 * g);
  EXPECT_EQ(range->mapped_bytes(), 0u);

  ASSERT_TRUE(range->Map(g, 2 * g, &error)) << error;
  EXPECT_EQ(range->mapped_bytes(), 2 * g);
  EXPECT_EQ(Read(*range, g, 4096), std::vector<uint8_t>(4096, 0));
  Write(*range, g, std::vector<uint8_t>(4096, 0xab));
  Write(*range, 2 * g, std::vector<uint8_t>(4096, 0xcd));

  // Mapping a range whose granules are already mapped leaves them and their contents alone.
  ASSERT_TRUE(range->Map(0, 3 * g, &error)) << error;
  EXPECT_EQ(range->mapped_bytes(), 3 * g);
  EXPECT_EQ(Read(*range, g, 4096), std::vector<uint8_t>(4096, 0xab));

  // Unmapped and mapped again: fresh memory, zeroed.
  ASSERT_TRUE(range->Unmap(g, g, &error)) << error;
  EXPECT_EQ(range->mapped_bytes(), 2 * g);
  ASSERT_TRUE(range->Map(g, g, &error)) << error;
  EXPECT_EQ(Read(*range, g, 4096), std::vector<uint8_t>(4096, 0));
  EXPECT_EQ(Read(*range, 2 * g, 4096), std::vector<uint8_t>(4096, 0xcd));
}

TEST(VmmRangeTest, RefusesRangesItDoesNotCover) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  std::string error;
  auto range = VmmRange::Create(0, 1, &error);
  ASSERT_NE(range, nullptr) << error;
  const size_t g = range->granularity();
  EXPECT_FALSE(range->Map(1, g, &error));
  EXPECT_NE(error.find("not granule-aligned"), std::string::npos) << error;
  EXPECT_FALSE(range->Map(g, g, &error));  // past the end of a one-granule range
  EXPECT_FALSE(range->Unmap(0, 2 * g, &error));
  EXPECT_EQ(range->mapped_bytes(), 0u);
}

TEST(VmmRangeTest, NoDeviceIsAnErrorNotACrash) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  std::string error;
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(VmmRange::Create(count, 1, &error), nullptr);
  EXPECT_NE(error.find("device"), std::string::npos) << error;
}

}  // namespace
}  // namespace tandem::kernels::cuda
