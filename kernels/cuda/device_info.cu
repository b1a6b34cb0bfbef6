#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "kernels/cuda/device_info.h"
#include "kernels/cuda/handled_error.h"

namespace tandem::kernels::cuda {
namespace {

bool Check(cudaError_t status, const char* what, std::string* error) {
  if (Handled(status) == cudaSuccess) return true;
  if (error != nullptr) *error = std::string(what) + ": " + cudaGetErrorString(status);
  return false;
}

__global__ void Saxpy(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

std::vector<DeviceInfo> ListDevices(std::string* error) {
  std::vector<DeviceInfo> devices;
  int count = 0;
  if (!Check(cudaGetDeviceCount(&count), "cudaGetDeviceCount", error)) return devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (!Check(cudaGetDeviceProperties(&prop, i), "cudaGetDeviceProperties", error)) break;
    devices.push_back({i, prop.name, prop.major, prop.minor,
                       static_cast<int64_t>(prop.totalGlobalMem), prop.multiProcessorCount});
  }
  return devices;
}

bool SelfTest(int device, std::string* error) {
  constexpr int n = 1 << 20;
  if (!Check(cudaSetDevice(device), "cudaSetDevice", error)) return false;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000);
    y[i] = 1.0f;
  }
  float* dx = nullptr;
  float* dy = nullptr;
  bool ok = Check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc", error) &&
            Check(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc", error) &&
            Check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy",
                  error) &&
            Check(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy",
                  error);
  if (ok) {
    Saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
    ok = Check(cudaGetLastError(), "kernel launch", error) &&
         Check(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy",
               error);
  }
  cudaFree(dx);
  cudaFree(dy);
  if (!ok) return false;
  for (int i = 0; i < n; ++i) {
    if (y[i] != 2.0f * static_cast<float>(i % 1000) + 1.0f) {
      if (error != nullptr) *error = "wrong result at element " + std::to_string(i);
      return false;
    }
  }
  return true;
}

}  // namespace tandem::kernels::cuda
