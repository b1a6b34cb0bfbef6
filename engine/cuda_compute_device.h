// The ComputeDevice of one CUDA GPU (CUDA builds only): weights placed by
// engine/cuda_tensor_placer.h, kernels/cuda/cuda_ops.h computing, KV pages and SSM blocks in
// device memory mapped by engine/cuda_memory_backing.h.
#ifndef TANDEM_ENGINE_CUDA_COMPUTE_DEVICE_H_
#define TANDEM_ENGINE_CUDA_COMPUTE_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/compute_device.h"

namespace tandem::engine {

// FAILED_PRECONDITION naming the reason when GPU `index` cannot be used.
absl::StatusOr<std::unique_ptr<ComputeDevice>> OpenCudaDevice(int index);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_CUDA_COMPUTE_DEVICE_H_
