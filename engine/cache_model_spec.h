// Describes a loaded model's dimensions to the cache (cache::ModelSpec), which sizes KV pages and
// SSM checkpoints and prices recomputation with them. Lives in engine/ because it is where
// models/ and cache/ meet; the byte sizes are those tandem itself stores (fp32 on CPU).
#ifndef TANDEM_ENGINE_CACHE_MODEL_SPEC_H_
#define TANDEM_ENGINE_CACHE_MODEL_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "cache/model_spec.h"
#include "models/model_config.h"

namespace tandem::engine {

absl::StatusOr<cache::ModelSpec> CacheModelSpecFor(const models::ModelConfig& config,
                                                   const std::string& name);

// Reads DIR/config.json (for `tandem simulate --model-spec DIR`).
absl::StatusOr<cache::ModelSpec> LoadCacheModelSpec(const std::string& dir);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_CACHE_MODEL_SPEC_H_
