// Feed-forward parts of a decoder layer: the gated MLP down(act(gate·x) ⊙ up·x), the plain one
// down(act(up·x)), and a top-k mixture of experts of either kind (Jamba: the top-k of a softmax
// over all experts, kept as they are; Granite: renormalised; Nemotron 3: sigmoid-scored, plain
// experts, kernels::MoeRouting).
#ifndef TANDEM_MODELS_FEED_FORWARD_H_
#define TANDEM_MODELS_FEED_FORWARD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/forward_context.h"
#include "models/model_config.h"
#include "models/tensor_parallel.h"
#include "models/weight_store.h"

namespace tandem::models {

class GatedMlp {
 public:
  // Separate gate_proj / up_proj / down_proj tensors under `prefix` (Jamba layout).
  // `intermediate` is the full model's, of which a tensor-parallel `shard` keeps its share (the
  // same for every loader here).
  static absl::StatusOr<GatedMlp> Load(WeightStore& weights, const std::string& prefix,
                                       int32_t hidden, int32_t intermediate,
                                       kernels::Activation act, const TensorShard& shard = {});
  // Granite's shared MLP: input_linear [2I, H] (gate ‖ up, already stacked) and
  // output_linear [H, I] under `prefix`.
  static absl::StatusOr<GatedMlp> LoadStacked(WeightStore& weights, const std::string& prefix,
                                              int32_t hidden, int32_t intermediate,
                                              kernels::Activation act,
                                              const TensorShard& shard = {});
  // out: [rows, hidden], this worker's partial sum when sharded (the same for every Forward here).
  void Forward(const ForwardContext& ctx, const float* x, float* out) const;

 private:
  int32_t hidden_ = 0;
  int32_t intermediate_ = 0;
  kernels::Activation act_ = kernels::Activation::kSilu;
  kernels::WeightMatrix gate_up_;  // [2I, H]
  kernels::WeightMatrix down_;     // [H, I]
};

// Nemotron-H's MLP: down(act(up·x + b_up)) + b_down, no gate.
class PlainMlp {
 public:
  // up_proj.weight [I, H] and down_proj.weight [H, I] (+ their biases when `bias`) under
  // `prefix`.
  static absl::StatusOr<PlainMlp> Load(WeightStore& weights, const std::string& prefix,
                                       int32_t hidden, int32_t intermediate,
                                       kernels::Activation act, bool bias,
                                       const TensorShard& shard = {});
  void Forward(const ForwardContext& ctx, const float* x, float* out) const;

 private:
  int32_t hidden_ = 0;
  int32_t intermediate_ = 0;
  kernels::Activation act_ = kernels::Activation::kReluSquared;
  kernels::WeightMatrix up_;    // [I, H]
  kernels::WeightMatrix down_;  // [H, I]
  const float* up_bias_ = nullptr;
  const float* down_bias_ = nullptr;
};

class MixtureOfExperts {
 public:
  // router.weight and experts.{e}.{gate,up,down}_proj.weight under `prefix` (Jamba).
  static absl::StatusOr<MixtureOfExperts> Load(WeightStore& weights, const std::string& prefix,
                                               const ModelConfig& config,
                                               const TensorShard& shard = {});
  // router.layer.weight [E, H] and every expert in two tensors under `prefix` (Granite):
  // input_linear.weight [E, 2I, H] (gate ‖ up per expert), output_linear.weight [E, H, I].
  static absl::StatusOr<MixtureOfExperts> LoadStacked(WeightStore& weights,
                                                      const std::string& prefix,
                                                      const ModelConfig& config,
                                                      const TensorShard& shard = {});
  // Nemotron 3's routed experts under `prefix`: gate.weight [E, H] and
  // gate.e_score_correction_bias [E]; each expert's up_proj [I, W] and down_proj [W, I], as
  // experts.{e}.{up,down}_proj.weight (the hub's checkpoints) or stacked as experts.up_proj
  // [E, I, W] and experts.down_proj [E, W, I] (transformers 5's names); W is the latent width,
  // with fc1_latent_proj [W, H] and fc2_latent_proj [H, W] (+ biases when ffn_bias), or H.
  static absl::StatusOr<MixtureOfExperts> LoadNemotronH(WeightStore& weights,
                                                        const std::string& prefix,
                                                        const ModelConfig& config,
                                                        const TensorShard& shard = {});
  void Forward(const ForwardContext& ctx, const float* x, float* out) const;

 private:
  // The dimensions and routing rule from `config`, without weights.
  static MixtureOfExperts Shaped(const ModelConfig& config, const TensorShard& shard);

  int32_t hidden_ = 0;  // the layer's input and output width
  int32_t width_ = 0;   // the experts' (the latent projection's, when there is one)
  int32_t intermediate_ = 0;
  int32_t top_k_ = 0;
  kernels::MoeRouting routing_;
  bool gated_ = true;
  kernels::Activation act_ = kernels::Activation::kSilu;
  kernels::WeightMatrix router_;
  std::vector<kernels::WeightMatrix> gate_up_;  // or up alone, when !gated_
  std::vector<kernels::WeightMatrix> down_;
  // Nemotron 3's latent projection, hidden → width_ before the experts and back after.
  kernels::WeightMatrix to_latent_;
  kernels::WeightMatrix from_latent_;
  const float* to_latent_bias_ = nullptr;
  const float* from_latent_bias_ = nullptr;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_FEED_FORWARD_H_
