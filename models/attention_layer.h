// Causal self-attention over the paged KV cache: fused q‖k‖v projection, optional LoRA adapters
// on q/k/v (Zamba2's per-position adapters), optional rotary embedding (Zamba2), GQA, o_proj.
// Jamba's attention has no positional encoding at all. Decode rows of sequences that share KV
// pages (a cached prefix) are attended with Hydragen's decomposition (shared_prefix_plan.h).
#ifndef TANDEM_MODELS_ATTENTION_LAYER_H_
#define TANDEM_MODELS_ATTENTION_LAYER_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"
#include "models/forward_context.h"
#include "models/model_config.h"
#include "models/shared_prefix_plan.h"
#include "models/tensor_parallel.h"
#include "models/weight_store.h"

namespace tandem::models {

// q += B_q·(A_q·x), and likewise for k and v. `down` stacks A_q ‖ A_k ‖ A_v: [3r, in].
struct QkvAdapter {
  int32_t rank = 0;
  kernels::WeightMatrix down;
  std::array<kernels::WeightMatrix, 3> up = {};  // [width_q, r], [width_k, r], [width_v, r]
};

class AttentionLayer {
 public:
  // `prefix` is e.g. "model.layers.4.self_attn."; `dims` are the full model's, of which a
  // tensor-parallel `shard` keeps its share of the heads.
  static absl::StatusOr<AttentionLayer> Load(WeightStore& weights, const std::string& prefix,
                                             const AttentionDims& dims, int32_t hidden,
                                             const TensorShard& shard = {});

  // x: [rows, dims.input_width]; out: [rows, hidden] (this worker's partial sum, when sharded).
  // Writes this layer's K/V for the new positions into each sequence's pages at `attention_index`.
  void Forward(const ForwardContext& ctx, const float* x, const QkvAdapter* adapter,
               int32_t attention_index, float* out) const;

 private:
  // Hydragen for the decode rows in `plan`: each shared node attended once by all its members,
  // then each member's own suffix, into the member's rows of `attn`. Where the backend resumes
  // attention exactly, the nodes and the suffix continue one online softmax (the bits of
  // attention without Hydragen); elsewhere their parts merge by log-sum-exp.
  void SharedPrefixForward(const ForwardContext& ctx, const SharedPrefixPlan& plan,
                           const float* qkv, int64_t width, int32_t attention_index,
                           float* attn) const;

  AttentionDims dims_;
  int32_t hidden_ = 0;
  kernels::WeightMatrix qkv_;  // [(heads + 2·kv_heads)·head_dim, input_width]
  kernels::WeightMatrix o_;    // [hidden, heads·head_dim]
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_ATTENTION_LAYER_H_
