// Flags that choose where a model runs and how its weights are kept, shared by serve, generate
// and bench-engine.
#ifndef TANDEM_SERVER_CLI_MODEL_FLAGS_H_
#define TANDEM_SERVER_CLI_MODEL_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/compute_device.h"
#include "models/tensor_parallel_group.h"
#include "models/weight_store.h"
#include "server/cli/args.h"

namespace tandem::cli {

// --weight-dtype: auto (the checkpoint's bf16/f16 as stored, else fp32), f32, bf16, f16 or int8.
FlagSpec WeightDTypeFlagSpec();
// The flag's value (kAuto when absent); InvalidArgument naming the flag and the choices.
absl::StatusOr<models::WeightStorage> ReadWeightDType(const Args& args);

// --device: cpu (default), cuda or cuda:N.
FlagSpec DeviceFlagSpec();
// Opens the device the flag names (the CPU when absent); errors name the flag.
absl::StatusOr<std::unique_ptr<engine::ComputeDevice>> OpenDevice(const std::string& name);

// --gpu-tensor-cores: prefill GEMMs on the GPU's tensor cores
// (engine::ComputeOptions::tensor_core_matmul).
FlagSpec GpuTensorCoresFlagSpec();
// Whether the flag is on; InvalidArgument when it is and `device` (--device's value) is the CPU,
// where it would silently do nothing.
absl::StatusOr<bool> ReadGpuTensorCores(const Args& args, const std::string& device);

// --fast-kernels: the engine without batch-invariant kernels (engine::EngineConfig::
// batch_invariant false), on either device.
FlagSpec FastKernelsFlagSpec();
// Whether the engine's kernels are batch-invariant (no --fast-kernels). InvalidArgument when
// `tensor_core_matmul` (--gpu-tensor-cores) is on without --fast-kernels: the batch-invariant
// kernels keep every product on our fp32 kernels, so the switch would silently do nothing.
absl::StatusOr<bool> ReadBatchInvariant(const Args& args, bool tensor_core_matmul);

// --gpu-graphs: repeated passes replayed from CUDA graphs (engine::ComputeOptions::cuda_graphs).
FlagSpec GpuGraphsFlagSpec();
// Whether the flag is on; InvalidArgument on the CPU, like ReadGpuTensorCores.
absl::StatusOr<bool> ReadGpuGraphs(const Args& args, const std::string& device);

// --tensor-parallel N: the model split over N workers (models/tensor_parallel_group.h), threads
// sharing the compute threads on the CPU.
FlagSpec TensorParallelFlagSpec();
// The flag's value (1 when absent). InvalidArgument outside [1, 64], or above 1 on a GPU
// (`device`), where tensor parallelism is not built yet.
absl::StatusOr<int32_t> ReadTensorParallel(const Args& args, const std::string& device);

// Compute threads for each of `workers` (`threads` in all, 0 = one per core): at least 1.
int ThreadsPerWorker(int threads, int32_t workers);
// Each tensor-parallel worker's backend, as the lead's: the fast CPU backend with `threads`.
models::TensorParallelGroup::OpsFactory CpuWorkerOps(int threads, bool batch_invariant);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_MODEL_FLAGS_H_
