// Failed runtime calls whose failure is answered where it happens.
#ifndef TANDEM_KERNELS_CUDA_HANDLED_ERROR_H_
#define TANDEM_KERNELS_CUDA_HANDLED_ERROR_H_

#include <cuda_runtime_api.h>

namespace tandem::kernels::cuda {

// A runtime call that fails (cudaSetDevice on a missing GPU, cudaMalloc out of memory) also
// leaves its error as the calling thread's "last error", and every kernel launch is checked with
// cudaGetLastError: the next launch on that thread, however sound, would report the old failure
// as its own. Where a failure is answered on the spot (an error message, a refused request),
// pass its status through here, which takes it off the thread, so that it is reported once.
inline cudaError_t Handled(cudaError_t status) {
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_HANDLED_ERROR_H_
