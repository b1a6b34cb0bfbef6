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

}  // namespace tandem::cli
