// CUDA versions of the attention ops of kernels/ops.h (the contracts are there): the paged-KV
// write, attention over a key range with its log-sum-exp, and the LSE merge of attention parts
// (Hydragen). The args structs are the CPU ones; every pointer in them is device memory,
// including the page tables (device arrays of device page pointers: the device block tables).
// MergeAttention's parts list is a host array, passed to the kernel by value (at most
// kMaxParts).
//
// Each call enqueues its work on `stream` and returns the launch error, or cudaErrorInvalidValue
// for arguments the kernels cannot take.
//
// Two shapes of work:
//  - many query rows over the same keys (a prefill chunk, Hydragen's shared prefix) attend tile
//    by tile, a block staging shared K/V tiles for its virtual rows (a row and one query head of
//    a GQA group): on the tensor cores for the common head dims (mma_attention.h), else on the
//    CUDA cores;
//  - rows that each read their own keys (decode rows, a few rows) take a block per (row, KV
//    head): the group's query heads share each staged key, so a key is read once per row, not
//    once per query head. Few such rows leave most of the GPU idle over a long context, so the
//    keys can be split (flash-decoding): each split writes a part into scratch and a merge
//    combines them.
#ifndef TANDEM_KERNELS_CUDA_ATTENTION_KERNELS_H_
#define TANDEM_KERNELS_CUDA_ATTENTION_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "kernels/ops.h"

namespace tandem::kernels::cuda {

inline constexpr int kMaxParts = 8;
inline constexpr int kMaxHeadDim = 256;
inline constexpr int kMaxKeySplits = 64;

// The key splits of a call and their scratch (device memory): each split's output at
// [split, rows, heads·head_dim] and its log-sum-exp at [split, rows, heads]. One split needs no
// scratch.
struct KeySplits {
  int count = 1;
  float* out = nullptr;
  float* lse = nullptr;

  static int64_t OutFloats(int count, int64_t rows, int32_t heads, int32_t head_dim) {
    return count * rows * heads * head_dim;
  }
  static int64_t LseFloats(int count, int64_t rows, int32_t heads) { return count * rows * heads; }
};

// How the tiled attention multiplies on the tensor cores: kFp32, three TF32 products per product
// (within fp32 rounding of the CUDA-core kernels: the default), or kTf32, one (a third of the
// work, ~1e-3 relative error per score: CudaOpsOptions::tensor_core_matmul opts in).
enum class TensorCorePrecision { kFp32, kTf32 };

// Which kernels a call may take. kFastest picks by the call's shape: tiles for many rows, key
// splits to fill the GPU. kSameForEveryRow (the batch-invariant mode) sends every row through
// one kernel, chosen by the model's shapes alone (the tensor-core tiles where they fit, else the
// row kernel), with its keys unsplit: a row then gets the same bits whether it came in a
// prefill chunk, a varlen pass, a decode batch or alone. Splits must be 1.
enum class AttentionKernels { kFastest, kSameForEveryRow };

cudaError_t WriteKv(cudaStream_t stream, const float* k, int64_t ld_k, const float* v, int64_t ld_v,
                    int64_t tokens, int64_t start_pos, const PagedKv& kv);
// A decode batch: row r to positions[r] of page_tables[r] (device memory); kv gives the layout.
cudaError_t WriteKvAt(cudaStream_t stream, const float* k, int64_t ld_k, const float* v,
                      int64_t ld_v, int64_t rows, float* const* const* page_tables,
                      const int64_t* positions, const PagedKv& kv);

// How many key splits the call should use on a device with that many multiprocessors: 1 where
// it attends tile by tile or already fills the GPU.
int PartialAttentionSplits(const PartialAttentionArgs& a, int multiprocessors);
// Attention (causal over [0, pos]) is PartialAttention over [0, start_pos + rows) with `causal`.
cudaError_t PartialAttention(cudaStream_t stream, const PartialAttentionArgs& a,
                             const KeySplits& splits = {},
                             TensorCorePrecision precision = TensorCorePrecision::kFp32,
                             AttentionKernels kernels = AttentionKernels::kFastest);

// Rows with their own tables (AttentionArgs::page_tables set): one launch for every row. With
// the pass's sequences given (cu_seqlens, max_seqlen), a sequence's rows attend tile by tile.
// Under kSameForEveryRow a decode batch must come as sequences of one row each (cu_seqlens
// 0, 1, 2, …), so that its rows take the tiles a prefill's rows take.
int DecodeAttentionSplits(const AttentionArgs& a, int multiprocessors);
cudaError_t DecodeAttention(cudaStream_t stream, const AttentionArgs& a,
                            const KeySplits& splits = {},
                            TensorCorePrecision precision = TensorCorePrecision::kFp32,
                            AttentionKernels kernels = AttentionKernels::kFastest);

// `out` may be parts[0].out (same stride); unlike on the CPU, `lse` must not be a part's lse.
cudaError_t MergeAttention(cudaStream_t stream, std::span<const AttentionPart> parts, int64_t rows,
                           int32_t heads, int32_t head_dim, float* out, int64_t ld_out, float* lse,
                           int64_t ld_lse);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_ATTENTION_KERNELS_H_
