#include "server/cli/model_flags.h"

#include <algorithm>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/backends.h"
#include "models/status_macros.h"

namespace tandem::cli {

FlagSpec WeightDTypeFlagSpec() {
  return {"weight-dtype", true,
          "format the weight matrices are kept and read in: auto (default: a bf16/f16 "
          "checkpoint's own, else f32), f32, bf16, f16, or int8 (per-row weight-only "
          "quantization, lossy); activations and sums stay f32"};
}

absl::StatusOr<models::WeightStorage> ReadWeightDType(const Args& args) {
  const std::optional<std::string> value = args.String("weight-dtype");
  if (!value) return models::WeightStorage::kAuto;
  absl::StatusOr<models::WeightStorage> storage = models::ParseWeightStorage(*value);
  if (!storage.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--weight-dtype: ", storage.status().message()));
  }
  return *storage;
}

FlagSpec DeviceFlagSpec() {
  return {"device", true,
          "where the model runs: cpu (default), cuda (GPU 0) or cuda:N; on a GPU the weights, "
          "activations, KV pages and SSM blocks live in its memory"};
}

absl::StatusOr<std::unique_ptr<engine::ComputeDevice>> OpenDevice(const std::string& name) {
  absl::StatusOr<std::unique_ptr<engine::ComputeDevice>> device = engine::ComputeDevice::Open(name);
  if (!device.ok()) {
    return absl::Status(device.status().code(),
                        absl::StrCat("--device: ", device.status().message()));
  }
  return device;
}

FlagSpec GpuTensorCoresFlagSpec() {
  return {"gpu-tensor-cores", false,
          "on --device cuda, prefill GEMMs on the tensor cores (TF32 for f32 weights, bf16/f16 "
          "activations for bf16/f16 weights): faster, but logits no longer match the CPU's to "
          "1e-3 (default: exact fp32 products)"};
}

namespace {

// A switch that only a GPU reads: refused on the CPU, where it would silently do nothing.
absl::StatusOr<bool> ReadGpuSwitch(const Args& args, const std::string& flag,
                                   const std::string& device) {
  if (!args.Has(flag)) return false;
  if (device == "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source(flag), " needs a GPU (--device cuda or cuda:N)"));
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> ReadGpuTensorCores(const Args& args, const std::string& device) {
  return ReadGpuSwitch(args, "gpu-tensor-cores", device);
}

FlagSpec FastKernelsFlagSpec() {
  return {"fast-kernels", false,
          "not batch-invariant: faster prefill (on a GPU: cuBLAS, tiled attention with key "
          "splits), but a request's logprobs then move by rounding with its batch and with cache "
          "hits (default: batch-invariant, a hit gives the bits of a miss)"};
}

absl::StatusOr<bool> ReadBatchInvariant(const Args& args, bool tensor_core_matmul) {
  const bool fast = args.Has("fast-kernels");
  if (tensor_core_matmul && !fast) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source("gpu-tensor-cores"),
                     " needs --fast-kernels: the default, batch-invariant kernels keep every "
                     "product on our fp32 kernels"));
  }
  return !fast;
}

FlagSpec GpuGraphsFlagSpec() {
  return {"gpu-graphs", false,
          "on --device cuda, replay repeated passes (decode steps of the same batch size) from "
          "CUDA graphs instead of launching each kernel: the same results, less host time per "
          "token (default: off until measured on more GPUs)"};
}

absl::StatusOr<bool> ReadGpuGraphs(const Args& args, const std::string& device) {
  return ReadGpuSwitch(args, "gpu-graphs", device);
}

FlagSpec TensorParallelFlagSpec() {
  return {"tensor-parallel", true,
          "split the model over N workers (attention and Mamba heads, MLP channels), each a "
          "thread with its share of the compute threads; CPU only so far (default: 1)"};
}

absl::StatusOr<int32_t> ReadTensorParallel(const Args& args, const std::string& device) {
  TANDEM_ASSIGN_OR_RETURN(const std::optional<int64_t> value, args.Int("tensor-parallel"));
  const int64_t workers = value.value_or(1);
  if (workers < 1 || workers > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source("tensor-parallel"), " must be in [1, 64], got ", workers));
  }
  if (workers > 1 && device != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Source("tensor-parallel"), " ", workers,
                     " runs on --device cpu only (the GPU "
                     "workers and their NCCL collectives are not built yet)"));
  }
  return static_cast<int32_t>(workers);
}

int ThreadsPerWorker(int threads, int32_t workers) {
  const int total = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, total / std::max(workers, 1));
}

models::TensorParallelGroup::OpsFactory CpuWorkerOps(int threads, bool batch_invariant) {
  return
      [threads, batch_invariant](int32_t) { return kernels::MakeCpuOps(threads, batch_invariant); };
}

}  // namespace tandem::cli
