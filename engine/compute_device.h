// Where a model runs: the host's CPU or one CUDA GPU. A ComputeDevice gives each layer what it
// needs to run there, so a caller picks the device once (`--device`) and never branches on it:
//   models/  a TensorPlacer that puts the weights in the device's memory (none on the CPU),
//   kernels/ the compute backend, one per thread that runs models,
//   cache/   the memory the allocator takes KV pages and SSM blocks from.
#ifndef TANDEM_ENGINE_COMPUTE_DEVICE_H_
#define TANDEM_ENGINE_COMPUTE_DEVICE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cache/memory_backing.h"
#include "kernels/ops.h"
#include "models/weight_store.h"

namespace tandem::engine {

struct ComputeOptions {
  int threads = 0;  // CPU compute threads; 0 = one per core (a GPU ignores it)
  // Batch-invariant kernels (kernels::CpuOps::set_batch_invariant; on a GPU
  // kernels::cuda::CudaOpsOptions::batch_invariant): a row's result does not depend on its batch
  // nor on prefill against decode.
  bool batch_invariant = false;
  // A GPU's prefill GEMMs on its tensor cores (kernels::cuda::CudaOpsOptions): TF32 for fp32
  // weights, bf16/f16 activations for 16-bit weights. A multiple of the fp32 peak rate, for ~1e-3
  // relative error per product: logits no longer match the CPU's to 1e-3 (greedy tokens may
  // differ on near ties). Off, every product is fp32. The CPU ignores it.
  bool tensor_core_matmul = false;
  // A GPU records each pass and replays a repeated one (a decode step of a batch size it has
  // seen) from a CUDA graph (kernels::cuda::CudaOpsOptions::graphs): the same results, a launch
  // per pass instead of per kernel. The CPU ignores it.
  bool cuda_graphs = false;
};

class ComputeDevice {
 public:
  // "cpu", "cuda" (GPU 0) or "cuda:N". INVALID_ARGUMENT for any other name; FAILED_PRECONDITION
  // when this build has no CUDA or the GPU cannot be used (no driver, no such device).
  static absl::StatusOr<std::unique_ptr<ComputeDevice>> Open(const std::string& name);
  virtual ~ComputeDevice() = default;

  // "cpu" or "cuda:N".
  virtual std::string name() const = 0;
  // True when the device computes in host memory (nothing to place, copy or read back).
  virtual bool on_host() const = 0;

  // Loads weights into the device's memory (models::LoadOptions::placer); null on the host.
  // Models loaded with it must be destroyed before the device.
  virtual models::TensorPlacer* weight_placer() = 0;

  // A compute backend on this device.
  virtual absl::StatusOr<std::unique_ptr<kernels::Ops>> CreateOps(
      const ComputeOptions& options) = 0;

  // `bytes` of memory for KV pages and SSM blocks (cache::AllocatorOptions::make_backing).
  virtual absl::StatusOr<std::unique_ptr<cache::MemoryBacking>> CreateStateBacking(
      size_t bytes) = 0;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_COMPUTE_DEVICE_H_
