// One sequence of a varlen attention pass (AttentionArgs::cu_seqlens) as a PartialAttention
// call, for device code: its rows sit at consecutive positions over the pages of its first row.
#ifndef TANDEM_KERNELS_CUDA_VARLEN_SEQUENCE_CUH_
#define TANDEM_KERNELS_CUDA_VARLEN_SEQUENCE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels::cuda {

// Sequence `seq` of the pass: causal attention over [0, its first position + its rows).
__device__ __forceinline__ PartialAttentionArgs SequenceOf(const AttentionArgs& a, int64_t seq) {
  const int64_t first = a.cu_seqlens[seq] - a.cu_seqlens[0];
  PartialAttentionArgs p;
  p.rows = a.cu_seqlens[seq + 1] - a.cu_seqlens[seq];
  if (p.rows <= 0) {  // an empty sequence (last in the pass: its first row is past the tables)
    p.rows = 0;
    return p;
  }
  p.start_pos = a.positions[first];
  p.causal = true;
  p.heads = a.heads;
  p.q = a.q + first * a.ld_q;
  p.ld_q = a.ld_q;
  p.kv = a.kv;
  p.kv.pages = a.page_tables[first];
  p.key_begin = 0;
  p.key_end = p.start_pos + p.rows;
  p.scale = a.scale;
  p.out = a.out + first * a.ld_out;
  p.ld_out = a.ld_out;
  return p;
}

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_VARLEN_SEQUENCE_CUH_
