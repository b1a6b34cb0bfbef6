// Where a model keeps its per-sequence state, in two kinds of fixed-size units
// (docs/ARCHITECTURE.md, "Hybrid state and checkpoints"):
//  - KV pages: page_tokens positions of K and V for every attention layer;
//  - one SSM block: every SSM layer's conv state ([K-1, channels], the raw pre-conv inputs of the
//    last K-1 tokens) and SSM state (fp32; [din, N] for Mamba-1, [heads, P, N] for Mamba-2).
// A checkpoint of a sequence at position p is a copy of its SSM block taken after p tokens.
// A tensor-parallel model's units hold every worker's part one after another (worker r's at
// r × the worker's share), each part laid out like a whole unit of the worker's slice: one
// allocation, one copy or one checkpoint covers every worker (models/tensor_parallel_group.h).
#ifndef TANDEM_MODELS_STATE_LAYOUT_H_
#define TANDEM_MODELS_STATE_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "models/model_config.h"

namespace tandem::models {

struct SsmLayerState {
  int64_t conv_offset = 0;  // floats from the block start
  int64_t conv_floats = 0;
  int64_t ssm_offset = 0;
  int64_t ssm_floats = 0;
};

class StateLayout {
 public:
  // `config` is one worker's slice (ShardConfig) of a model split over `workers`.
  StateLayout(const ModelConfig& config, int32_t page_tokens, int32_t workers = 1);

  int32_t page_tokens() const { return page_tokens_; }
  // Whole units, every worker's part included.
  int64_t kv_page_floats() const { return kv_page_floats_ * workers_; }
  int64_t ssm_block_floats() const { return ssm_block_floats_ * workers_; }
  // One worker's part of each, where the next worker's begins.
  int64_t worker_kv_page_floats() const { return kv_page_floats_; }
  int64_t worker_ssm_block_floats() const { return ssm_block_floats_; }
  int32_t workers() const { return workers_; }
  size_t kv_page_bytes() const { return kv_page_floats() * sizeof(float); }
  size_t ssm_block_bytes() const { return ssm_block_floats() * sizeof(float); }
  const SsmLayerState& ssm_layer(int32_t ssm_index) const { return ssm_layers_[ssm_index]; }
  int32_t num_attention_layers() const { return num_attention_layers_; }

  // KV pages a sequence of `tokens` positions occupies.
  int64_t PagesFor(int64_t tokens) const { return (tokens + page_tokens_ - 1) / page_tokens_; }
  kernels::PagedKv KvView(int32_t attention_index, float* const* pages) const;

 private:
  int32_t page_tokens_;
  int32_t workers_;
  int32_t num_attention_layers_;
  int32_t kv_heads_;
  int32_t head_dim_;
  int64_t kv_page_floats_ = 0;
  int64_t ssm_block_floats_ = 0;
  std::vector<SsmLayerState> ssm_layers_;
};

// A sequence's live state: the positions consumed so far, its KV pages (page i holds positions
// [i·page_tokens, (i+1)·page_tokens)) and its SSM block. The memory belongs to whoever filled
// the pointers (engine/SequenceMemory); the model only reads and writes through them.
struct SequenceState {
  int64_t tokens = 0;
  std::vector<float*> kv_pages;
  float* ssm = nullptr;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_STATE_LAYOUT_H_
