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
  absl::StatusOr<std::unique_ptr<engine::ComputeDevice>> device =
      engine::ComputeDevice::Open(name);
  if (!device.ok()) {
    return absl::Status(device.status().code(),
                        absl::StrCat("--device: ", device.status().message()));
  }
  return device;
}

}  // namespace tandem::cli
