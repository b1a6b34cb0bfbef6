// Helpers for the CUDA kernel tests: skipping without a device, and moving vectors to and from
// device memory with every CUDA error turned into a test failure.
#ifndef TANDEM_TESTS_CUDA_CUDA_TEST_UTIL_H_
#define TANDEM_TESTS_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/weight_matrix.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda::testing {

// Whether a CUDA device is usable.
inline bool HaveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Tests skip (not pass) without a device, except where TANDEM_REQUIRE_CUDA is set (as
// scripts/gpu-check.sh sets it on a GPU machine): there a missing device is a failure.
#define TANDEM_SKIP_WITHOUT_CUDA_DEVICE()                                        \
  do {                                                                           \
    if (!::tandem::kernels::cuda::testing::HaveDevice()) {                       \
      if (std::getenv("TANDEM_REQUIRE_CUDA") != nullptr) {                       \
        GTEST_FAIL() << "no usable CUDA device, and TANDEM_REQUIRE_CUDA is set"; \
      }                                                                          \
      GTEST_SKIP() << "no CUDA device";                                          \
    }                                                                            \
  } while (0)

#define ASSERT_CUDA_OK(expr)                                        \
  do {                                                              \
    const cudaError_t tandem_cuda_status = (expr);                  \
    ASSERT_EQ(tandem_cuda_status, cudaSuccess)                      \
        << #expr << ": " << cudaGetErrorString(tandem_cuda_status); \
  } while (0)

// CudaOps on GPU 0; null (with the failure recorded) when the device cannot be used.
inline std::unique_ptr<CudaOps> NewOps() {
  std::string error;
  auto ops = CudaOps::Create(0, &error);
  EXPECT_NE(ops, nullptr) << error;
  return ops;
}

template <typename T>
DeviceBuffer<T> ToDevice(const std::vector<T>& host) {
  DeviceBuffer<T> buffer;
  const cudaError_t status = buffer.Upload(host);
  EXPECT_EQ(status, cudaSuccess) << cudaGetErrorString(status);
  return buffer;
}

// A weight matrix of `format` in host memory (for the reference) and its device copy, from
// values uniform in [lo, hi).
struct DeviceWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  WeightMatrix host;
  DeviceBuffer<uint8_t> device_bytes;
  DeviceBuffer<float> device_scales;
  WeightMatrix device;
};

inline std::unique_ptr<DeviceWeights> MakeDeviceWeights(WeightFormat format, int64_t rows,
                                                        int64_t cols, uint32_t seed,
                                                        float lo = -1.0f, float hi = 1.0f) {
  auto w = std::make_unique<DeviceWeights>();
  const std::vector<float> values = kernels::testing::Rng(seed).Uniform(rows * cols, lo, hi);
  w->bytes.resize(static_cast<size_t>(rows * cols) * WeightElementBytes(format));
  w->scales.resize(rows);
  ConvertWeights(values.data(), rows, cols, format, w->bytes.data(), w->scales.data());
  const bool scaled = format == WeightFormat::kI8;
  w->host = {format, w->bytes.data(), scaled ? w->scales.data() : nullptr, rows, cols};
  w->device_bytes = ToDevice(w->bytes);
  w->device_scales = ToDevice(w->scales);
  w->device = {format, w->device_bytes.get(), scaled ? w->device_scales.get() : nullptr, rows,
               cols};
  return w;
}

template <typename T>
std::vector<T> ToHost(const DeviceBuffer<T>& buffer) {
  std::vector<T> host;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const cudaError_t status = buffer.Download(&host);
  EXPECT_EQ(status, cudaSuccess) << cudaGetErrorString(status);
  return host;
}

// R states of `floats` at kOffset inside blocks laid out in reverse order, the same contents on
// host and device, with each side's table (what Ops::Table hands each backend's kernels).
struct ScatteredDeviceStates {
  static constexpr int64_t kOffset = 3;
  ScatteredDeviceStates(int64_t rows, int64_t floats, uint32_t seed) : block(floats + kOffset + 1) {
    host = kernels::testing::Rng(seed).Uniform(rows * block);
    device = ToDevice(host);
    for (int64_t r = 0; r < rows; ++r) {
      host_table.push_back(host.data() + (rows - 1 - r) * block);
      device_pointers.push_back(device.get() + (rows - 1 - r) * block);
    }
    device_table = ToDevice(device_pointers);
  }
  int64_t block;
  std::vector<float> host;
  DeviceBuffer<float> device;
  std::vector<float*> host_table, device_pointers;
  DeviceBuffer<float*> device_table;
};

// Sequences of random KV pages, all in one buffer on the host and its copy on the device, with
// each side's per-sequence page tables and the table of those tables the batched ops read.
struct PagedSequences {
  PagedSequences(const std::vector<int64_t>& pages_per_sequence, int64_t page_floats,
                 uint32_t seed) {
    int64_t total = 0;
    for (int64_t n : pages_per_sequence) total += n;
    host = kernels::testing::Rng(seed).Uniform(total * page_floats);
    device = ToDevice(host);
    host_pages.resize(pages_per_sequence.size());
    std::vector<std::vector<float*>> device_pages(pages_per_sequence.size());
    int64_t page = 0;
    for (size_t r = 0; r < pages_per_sequence.size(); ++r) {
      for (int64_t p = 0; p < pages_per_sequence[r]; ++p, ++page) {
        host_pages[r].push_back(host.data() + page * page_floats);
        device_pages[r].push_back(device.get() + page * page_floats);
      }
      device_page_tables.push_back(ToDevice(device_pages[r]));
    }
    std::vector<float* const*> device_tables;
    for (size_t r = 0; r < pages_per_sequence.size(); ++r) {
      host_tables.push_back(host_pages[r].data());
      device_tables.push_back(device_page_tables[r].get());
    }
    device_table_of_tables = ToDevice(device_tables);
  }
  std::vector<float> host;
  DeviceBuffer<float> device;
  std::vector<std::vector<float*>> host_pages;
  std::vector<DeviceBuffer<float*>> device_page_tables;
  std::vector<float* const*> host_tables;
  DeviceBuffer<float* const*> device_table_of_tables;
};

}  // namespace tandem::kernels::cuda::testing

#endif  // TANDEM_TESTS_CUDA_CUDA_TEST_UTIL_H_
