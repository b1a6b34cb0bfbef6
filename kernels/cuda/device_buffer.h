// Device memory owned by a host object (cudaMalloc'd, freed on destruction), with blocking
// copies for tests and setup; hot paths use their own streams and never allocate.
#ifndef TANDEM_KERNELS_CUDA_DEVICE_BUFFER_H_
#define TANDEM_KERNELS_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda/handled_error.h"

namespace tandem::kernels::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // `count` elements, uninitialised; a previous allocation is freed first.
  cudaError_t Allocate(size_t count) {
    if (data_ != nullptr) cudaFree(std::exchange(data_, nullptr));
    size_ = 0;
    if (count == 0) return cudaSuccess;
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, count * sizeof(T));
    if (status != cudaSuccess) return Handled(status);
    data_ = static_cast<T*>(p);
    size_ = count;
    return cudaSuccess;
  }
  // Allocates host.size() elements and copies them in.
  cudaError_t Upload(const std::vector<T>& host) {
    const cudaError_t status = Allocate(host.size());
    if (status != cudaSuccess || host.empty()) return status;
    return cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  cudaError_t Download(std::vector<T>* host) const {
    host->resize(size_);
    if (size_ == 0) return cudaSuccess;
    return cudaMemcpy(host->data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost);
  }

  T* get() const { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_DEVICE_BUFFER_H_
