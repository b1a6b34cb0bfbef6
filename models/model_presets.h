// Named random-weight model configurations, for benchmarks that need a realistic size without a
// checkpoint on disk: ~100M-parameter configs shaped like each family's real ones. The weights
// come from Model::CreateRandom.
#ifndef TANDEM_MODELS_MODEL_PRESETS_H_
#define TANDEM_MODELS_MODEL_PRESETS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "models/model_config.h"
#include "nlohmann/json.hpp"

namespace tandem::models {

// "jamba-100m", "zamba2-100m", "mamba2-100m", "granite-100m", "nemotron-h-100m".
std::vector<std::string> ModelPresetNames();
// config.json contents of a preset; INVALID_ARGUMENT naming the known presets otherwise.
absl::StatusOr<nlohmann::json> ModelPresetJson(const std::string& name);
absl::StatusOr<ModelConfig> ModelPreset(const std::string& name);
// The preset's model with random weights from `seed` (Model::CreateRandom).
absl::StatusOr<std::unique_ptr<Model>> RandomPresetModel(const std::string& name, uint64_t seed,
                                                         const LoadOptions& options = {});

}  // namespace tandem::models

#endif  // TANDEM_MODELS_MODEL_PRESETS_H_
