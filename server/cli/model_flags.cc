#include "server/cli/model_flags.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

}  // namespace tandem::cli
