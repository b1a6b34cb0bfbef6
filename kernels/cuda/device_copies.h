// Device copies of host buffers, owned together: a model's weights once placed on a GPU.
#ifndef TANDEM_KERNELS_CUDA_DEVICE_COPIES_H_
#define TANDEM_KERNELS_CUDA_DEVICE_COPIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/device_buffer.h"

namespace tandem::kernels::cuda {

class DeviceCopies {
 public:
  // A device copy of `bytes` bytes at `host` (256-byte aligned), alive as long as this object;
  // null with `error` set when the device is out of memory or unusable.
  const void* Copy(const void* host, size_t bytes, std::string* error) {
    DeviceBuffer<uint8_t> buffer;
    cudaError_t status = buffer.Allocate(bytes == 0 ? 1 : bytes);
    if (status == cudaSuccess && bytes > 0) {
      status = cudaMemcpy(buffer.get(), host, bytes, cudaMemcpyHostToDevice);
    }
    if (Handled(status) != cudaSuccess) {
      *error = "copying " + std::to_string(bytes) + " bytes to the device: " +
               cudaGetErrorString(status);
      return nullptr;
    }
    buffers_.push_back(std::move(buffer));
    return buffers_.back().get();
  }

 private:
  std::vector<DeviceBuffer<uint8_t>> buffers_;
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_DEVICE_COPIES_H_
