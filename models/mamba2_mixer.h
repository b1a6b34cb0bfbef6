// The Mamba-2 mixer shared by Zamba2 and Mamba2: in_proj → [z | xBC | dt];
// causal conv + SiLU on xBC; SSD scan with one scalar decay per head and groups sharing B/C;
// gated RMSNorm norm(y·silu(z)) (grouped for Zamba2, full width for Mamba2) → out_proj.
#ifndef TANDEM_MODELS_MAMBA2_MIXER_H_
#define TANDEM_MODELS_MAMBA2_MIXER_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/forward_context.h"
#include "models/model_config.h"
#include "models/tensor_parallel.h"
#include "models/weight_store.h"

namespace tandem::models {

class Mamba2Mixer {
 public:
  // `prefix` is e.g. "backbone.layers.3.mixer." or "model.layers.3.mamba."
  // `config` is the full model's, of which a tensor-parallel `shard` keeps its share of the
  // channels (models/tensor_parallel.h).
  static absl::StatusOr<Mamba2Mixer> Load(WeightStore& weights, const std::string& prefix,
                                          const ModelConfig& config, int32_t ssm_index,
                                          const TensorShard& shard = {});

  // x: [rows, H] normalised input; out: [rows, H] (this worker's partial sum, when sharded).
  void Forward(const ForwardContext& ctx, const float* x, float* out) const;

 private:
  Mamba2Dims dims_;
  // A gated norm over channels spread across tensor-parallel workers: its statistic is summed
  // across them, over all full_inner_ channels.
  bool norm_spans_ranks_ = false;
  int32_t full_inner_ = 0;
  int32_t hidden_ = 0;
  int32_t ssm_index_ = 0;
  kernels::WeightMatrix in_proj_;  // [2·din + 2gN + heads, H]
  const float* in_proj_bias_ = nullptr;
  const float* conv_weight_ = nullptr;  // [conv_channels, K]
  const float* conv_bias_ = nullptr;
  const float* dt_bias_ = nullptr;   // [heads]
  const float* a_ = nullptr;         // [heads] = -exp(A_log)
  const float* d_ = nullptr;         // [heads]
  const float* norm_ = nullptr;      // [din]
  kernels::WeightMatrix out_proj_;  // [H, din]
  const float* out_proj_bias_ = nullptr;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_MAMBA2_MIXER_H_
