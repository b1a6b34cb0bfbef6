// A models::TensorPlacer that puts a model's weights in GPU memory (CUDA builds only): load a
// model with it and run it on kernels/cuda/cuda_ops.h.
#ifndef TANDEM_ENGINE_CUDA_TENSOR_PLACER_H_
#define TANDEM_ENGINE_CUDA_TENSOR_PLACER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/weight_store.h"

namespace tandem::engine {

// Copies to `device`; FAILED_PRECONDITION if it cannot be used.
absl::StatusOr<std::unique_ptr<models::TensorPlacer>> CreateCudaTensorPlacer(int device);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_CUDA_TENSOR_PLACER_H_
