// A cache::MemoryBacking in GPU memory (kernels/cuda/vmm_range.h), so that an AVMP allocator
// keeps its KV pages and SSM blocks on a device and moves capacity between them by remapping.
// Built only with CUDA (TANDEM_HAVE_CUDA).
#ifndef TANDEM_ENGINE_CUDA_MEMORY_BACKING_H_
#define TANDEM_ENGINE_CUDA_MEMORY_BACKING_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "cache/memory_backing.h"

namespace tandem::engine {

// Reserves `bytes` of device addresses on `device` (rounded up to the VMM granularity, which
// AVMP's granules must be multiples of). FAILED_PRECONDITION without a usable driver or device,
// RESOURCE_EXHAUSTED if the reservation fails.
absl::StatusOr<std::unique_ptr<cache::MemoryBacking>> CreateCudaMemoryBacking(int device,
                                                                             size_t bytes);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_CUDA_MEMORY_BACKING_H_
