// What one token of a model costs, for the end-to-end harnesses' ratios: the FLOPs a prefill
// token multiplies through, and the weight bytes a decode step streams.
#ifndef TANDEM_BENCH_E2E_MODEL_FIGURES_H_
#define TANDEM_BENCH_E2E_MODEL_FIGURES_H_

#include "models/model.h"

namespace tandem::bench {

struct ModelFigures {
  double params = 0;                   // weights held, in floats
  double prefill_flops_per_token = 0;  // 2 × weights a prefill token multiplies by
  double decode_bytes_per_token = 0;   // weight bytes a decode step reads (≈, see Estimate)
};

// Weights each token touches: everything except the embedding table (one row is read) and the
// experts that routing does not pick; the LM head runs once per forward, not per prefill token.
// Bytes per weight are the model's average (the small fp32 vectors make it slightly high for
// 16-bit and int8 storage).
inline ModelFigures Estimate(const models::Model& model) {
  const models::ModelConfig& c = model.config();
  ModelFigures f;
  f.params = model.parameters();
  const double vocab_matrix = static_cast<double>(c.vocab_size) * c.hidden_size;
  double inactive = 0;
  for (const models::LayerSpec& layer : c.layers) {
    if (layer.ffn == models::FfnKind::kMoe) {
      const double width = c.expert_latent_size > 0 ? c.expert_latent_size : c.hidden_size;
      inactive += static_cast<double>(c.num_experts - c.experts_per_token) *
                  (c.ffn_gated ? 3 : 2) * width * c.expert_intermediate_size;
    }
  }
  const double lm_head = vocab_matrix;
  const double embed = c.tie_word_embeddings ? 0 : vocab_matrix;  // tied: counted once
  const double per_token = f.params - embed - lm_head - inactive;
  f.prefill_flops_per_token = 2 * per_token;
  f.decode_bytes_per_token = (per_token + lm_head) * model.weight_bytes() / f.params;
  return f;
}

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_E2E_MODEL_FIGURES_H_
