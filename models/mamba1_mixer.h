// Jamba's Mamba-1 mixer: in_proj → causal conv + SiLU → x_proj → RMSNorm on
// dt (before dt_proj), B and C → selective scan gated by silu(z) → out_proj.
#ifndef TANDEM_MODELS_MAMBA1_MIXER_H_
#define TANDEM_MODELS_MAMBA1_MIXER_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/forward_context.h"
#include "models/model_config.h"
#include "models/tensor_parallel.h"
#include "models/weight_store.h"

namespace tandem::models {

class Mamba1Mixer {
 public:
  // `prefix` is e.g. "model.layers.3.mamba."
  // `config` is the full model's, of which a tensor-parallel `shard` keeps its share of the
  // channels (models/tensor_parallel.h).
  static absl::StatusOr<Mamba1Mixer> Load(WeightStore& weights, const std::string& prefix,
                                          const ModelConfig& config, int32_t ssm_index,
                                          const TensorShard& shard = {});

  // x: [rows, H] normalised input; out: [rows, H] (this worker's partial sum, when sharded).
  void Forward(const ForwardContext& ctx, const float* x, float* out) const;

 private:
  Mamba1Dims dims_;
  int32_t hidden_ = 0;
  float eps_ = 0;
  int32_t ssm_index_ = 0;
  kernels::WeightMatrix in_proj_;  // [2·din, H], rows x ‖ z
  const float* in_proj_bias_ = nullptr;
  const float* conv_weight_ = nullptr;  // [din, K]
  const float* conv_bias_ = nullptr;
  kernels::WeightMatrix x_proj_;    // [R + 2N, din]
  const float* dt_norm_ = nullptr;   // [R]
  const float* b_norm_ = nullptr;    // [N]
  const float* c_norm_ = nullptr;    // [N]
  kernels::WeightMatrix dt_proj_;   // [din, R]
  const float* dt_bias_ = nullptr;   // [din]
  const float* a_ = nullptr;         // [din, N] = -exp(A_log)
  const float* d_ = nullptr;         // [din]
  kernels::WeightMatrix out_proj_;  // [H, din]
  const float* out_proj_bias_ = nullptr;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_MAMBA1_MIXER_H_
