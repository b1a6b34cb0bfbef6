// What CUDA devices this process can see, for `tandem devices` and for choosing a backend.
// Compiled only when TANDEM_CUDA is on; the CUDA runtime is linked statically, so a binary built
// with CUDA still runs (and reports no devices) on a machine without a GPU or driver.
#ifndef TANDEM_KERNELS_CUDA_DEVICE_INFO_H_
#define TANDEM_KERNELS_CUDA_DEVICE_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::kernels::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int64_t total_memory_bytes = 0;
  int multiprocessors = 0;
};

// The visible devices; empty with `error` set (e.g. "no CUDA driver") when there are none.
std::vector<DeviceInfo> ListDevices(std::string* error);

// Runs a small kernel on `device` (a SAXPY over 1M elements) and checks its result on the host:
// proof that the toolkit, driver and device work together. False with `error` otherwise.
bool SelfTest(int device, std::string* error);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_DEVICE_INFO_H_
