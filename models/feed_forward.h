// Feed-forward parts of a decoder layer: the gated MLP down(act(gate·x) ⊙ up·x) and a top-k
// mixture of such experts (Jamba: the top-k of a softmax over all experts, kept as they are;
// Granite: a softmax over the k selected, i.e. renormalised).
#ifndef TANDEM_MODELS_FEED_FORWARD_H_
#define TANDEM_MODELS_FEED_FORWARD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/forward_context.h"
#include "models/model_config.h"
#include "models/weight_store.h"

namespace tandem::models {

class GatedMlp {
 public:
  // Separate gate_proj / up_proj / down_proj tensors under `prefix` (Jamba layout).
  static absl::StatusOr<GatedMlp> Load(WeightStore& weights, const std::string& prefix,
                                       int32_t hidden, int32_t intermediate,
                                       kernels::Activation act);
  // Granite's shared MLP: input_linear [2I, H] (gate ‖ up, already stacked) and
  // output_linear [H, I] under `prefix`.
  static absl::StatusOr<GatedMlp> LoadStacked(WeightStore& weights, const std::string& prefix,
                                              int32_t hidden, int32_t intermediate,
                                              kernels::Activation act);
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
                                       kernels::Activation act, bool bias);
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
                                               const ModelConfig& config);
  // router.layer.weight [E, H] and every expert in two tensors under `prefix` (Granite):
  // input_linear.weight [E, 2I, H] (gate ‖ up per expert), output_linear.weight [E, H, I].
  static absl::StatusOr<MixtureOfExperts> LoadStacked(WeightStore& weights,
                                                      const std::string& prefix,
                                                      const ModelConfig& config);
  void Forward(const ForwardContext& ctx, const float* x, float* out) const;

 private:
  // The dimensions and routing rule from `config`, without weights.
  static MixtureOfExperts Shaped(const ModelConfig& config);

  int32_t hidden_ = 0;
  int32_t intermediate_ = 0;
  int32_t top_k_ = 0;
  bool renormalize_ = false;
  kernels::Activation act_ = kernels::Activation::kSilu;
  kernels::WeightMatrix router_;
  std::vector<kernels::WeightMatrix> gate_up_;
  std::vector<kernels::WeightMatrix> down_;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_FEED_FORWARD_H_
