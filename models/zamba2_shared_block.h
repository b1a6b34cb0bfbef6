// Zamba2's weight-shared transformer block: it reads concat(hidden,
// original embedding), has no residual connections inside, attention scale sqrt(2/dh), optional
// rotary, and per-position LoRA adapters (on the MLP always, on q/k/v optionally). Its weights
// are shared by several hybrid layers; the adapters and the KV cache belong to each position.
#ifndef TANDEM_MODELS_ZAMBA2_SHARED_BLOCK_H_
#define TANDEM_MODELS_ZAMBA2_SHARED_BLOCK_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "models/attention_layer.h"
#include "models/forward_context.h"
#include "models/model_config.h"
#include "models/weight_store.h"

namespace tandem::models {

// The adapters of one hybrid position k.
struct Zamba2Adapters {
  std::optional<QkvAdapter> attention;
  int32_t rank = 0;
  kernels::WeightMatrix mlp_down;  // [r, H]
  kernels::WeightMatrix mlp_up;    // [2I, r]
};

// Finds the stored name of a shared tensor: checkpoints keep one copy of each tied tensor under
// the prefix of one of the hybrid layers that use it. Returns "" when no candidate exists.
using SharedTensorResolver = std::function<std::string(int32_t block, const std::string& suffix)>;

class Zamba2SharedBlock {
 public:
  // `config` is the full model's; a tensor-parallel `shard` keeps its share of the attention
  // heads and MLP channels (models/tensor_parallel.h).
  static absl::StatusOr<Zamba2SharedBlock> Load(WeightStore& weights,
                                                const SharedTensorResolver& resolve, int32_t block,
                                                const ModelConfig& config,
                                                const TensorShard& shard = {});
  static absl::StatusOr<Zamba2Adapters> LoadAdapters(WeightStore& weights,
                                                     const SharedTensorResolver& resolve,
                                                     int32_t position, const ModelConfig& config,
                                                     const TensorShard& shard = {});

  // hidden, embedding: [rows, H]; out: [rows, H] (before the hybrid layer's own `linear`; this
  // worker's partial sum, when sharded).
  void Forward(const ForwardContext& ctx, const float* hidden, const float* embedding,
               const Zamba2Adapters& adapters, int32_t attention_index, float* out) const;

 private:
  int32_t hidden_ = 0;
  int32_t intermediate_ = 0;
  float eps_ = 0;
  kernels::Activation act_ = kernels::Activation::kGelu;
  const float* input_norm_ = nullptr;  // [2H]
  AttentionLayer attention_;
  const float* pre_ff_norm_ = nullptr;  // [H]
  kernels::WeightMatrix gate_up_;      // [2I, H]
  kernels::WeightMatrix down_;         // [H, I]
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_ZAMBA2_SHARED_BLOCK_H_
