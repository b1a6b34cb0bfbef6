// Attention of rows that each read their own keys (attention_kernels.h's second shape): the
// launch behind PartialAttention's and DecodeAttention's untiled cases. Internal to the
// attention kernels.
#ifndef TANDEM_KERNELS_CUDA_ROW_ATTENTION_H_
#define TANDEM_KERNELS_CUDA_ROW_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/ops.h"

namespace tandem::kernels::cuda {

// Which keys row t reads, in one of three forms:
//  - one sequence (page_tables null): `pages`, keys [key_begin, key_end), and with `causal`
//    only keys < start_pos + t + 1;
//  - a decode batch (positions set): page_tables[t], keys [0, positions[t]];
//  - rows with explicit ranges: page_tables[t], keys [begins[t], ends[t]).
struct RowKeys {
  float* const* pages = nullptr;
  int64_t key_begin = 0;
  int64_t key_end = 0;
  int64_t start_pos = 0;
  bool causal = false;
  float* const* const* page_tables = nullptr;
  const int64_t* positions = nullptr;
  const int64_t* begins = nullptr;
  const int64_t* ends = nullptr;
};

struct RowAttention {
  RowKeys keys;
  PagedKv kv;  // the layout; its pages come from `keys`
  int64_t rows = 0;
  int32_t heads = 0;
  const float* q = nullptr;
  int64_t ld_q = 0;
  float scale = 1.0f;
  float* out = nullptr;
  int64_t ld_out = 0;
  float* lse = nullptr;
  int64_t ld_lse = 0;  // may be null
};

// Splits that give a GPU of `multiprocessors` about four blocks each, for rows × KV heads blocks.
int RowAttentionSplits(int64_t rows, int32_t kv_heads, int multiprocessors);
cudaError_t LaunchRowAttention(cudaStream_t stream, const RowAttention& a, const KeySplits& splits);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_ROW_ATTENTION_H_
