// CUDA versions of the sequence ops of kernels/ops.h (the contracts are there): causal conv1d,
// the Mamba-1 selective scan and the Mamba-2 SSD scan, each with state snapshots at any token
// (Marconi's checkpoints), the paged-KV write, attention over a key range with its log-sum-exp,
// and the LSE merge of attention parts (Hydragen). The args structs are the CPU ones; every
// pointer in them is device memory: activations, weights, `state`, each snapshot's `dst`, and
// the page table `kv.pages` (a device array of device page pointers: the device block table).
// The snapshot list and the parts list themselves are host arrays, passed to the kernels by
// value (at most kMaxSnapshots / kMaxParts). A varlen call (args.sequences) is one launch with a
// grid row per sequence; its tables, the flat snapshot table included, are device memory, so
// its snapshots are not limited in number.
//
// Each call enqueues its work on `stream` and returns the launch error, or cudaErrorInvalidValue
// for arguments the kernels cannot take. The scans here run the recurrence token by token (the
// decode step's arithmetic) with the state spread over a warp's lanes; chunked SSD for long
// prefills is still to come.
#ifndef TANDEM_KERNELS_CUDA_SEQUENCE_KERNELS_H_
#define TANDEM_KERNELS_CUDA_SEQUENCE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "kernels/ops.h"

namespace tandem::kernels::cuda {

inline constexpr int kMaxSnapshots = 32;
inline constexpr int kMaxParts = 8;
inline constexpr int kMaxConvKernel = 8;
inline constexpr int kMaxHeadDim = 256;

// Also serves one token (decode).
cudaError_t CausalConv1d(cudaStream_t stream, const CausalConvArgs& args);
// Also serves SelectiveStateUpdate (one token).
cudaError_t SelectiveScan(cudaStream_t stream, const SelectiveScanArgs& args);
// Also serves SsdStateUpdate (one token). args.chunk_size is not used (see above).
cudaError_t SsdScan(cudaStream_t stream, const SsdScanArgs& args);

cudaError_t WriteKv(cudaStream_t stream, const float* k, int64_t ld_k, const float* v,
                    int64_t ld_v, int64_t tokens, int64_t start_pos, const PagedKv& kv);
// A decode batch: row r to positions[r] of page_tables[r] (device memory); kv gives the layout.
cudaError_t WriteKvAt(cudaStream_t stream, const float* k, int64_t ld_k, const float* v,
                      int64_t ld_v, int64_t rows, float* const* const* page_tables,
                      const int64_t* positions, const PagedKv& kv);
// Attention (causal over [0, pos]) is PartialAttention over [0, start_pos + rows) with `causal`.
// Many rows over the same pages (16 or more rows × query heads per KV head, head_dim ≤ 128)
// attend tile by tile, sharing K/V tiles in shared memory; fewer rows take a warp per row.
cudaError_t PartialAttention(cudaStream_t stream, const PartialAttentionArgs& args);
// Rows with their own tables (AttentionArgs::page_tables set): one launch for every row. With
// the pass's sequences given (cu_seqlens, max_seqlen), a sequence's rows attend tile by tile.
cudaError_t DecodeAttention(cudaStream_t stream, const AttentionArgs& args);
// Long contexts at small decode batches leave most of the GPU idle with a warp per (row, head):
// how many key splits a decode batch should use on a device with that many multiprocessors (1:
// none, or rows that attend tile by tile), and the split attention itself, which writes each
// split's part into partial_out [splits, rows, heads·head_dim] and partial_lse [splits, rows,
// heads] (device scratch) and merges them into a.out.
int DecodeAttentionSplits(const AttentionArgs& a, int multiprocessors);
cudaError_t SplitDecodeAttention(cudaStream_t stream, const AttentionArgs& a, int splits,
                                 float* partial_out, float* partial_lse);
// `out` may be parts[0].out (same stride); unlike on the CPU, `lse` must not be a part's lse.
cudaError_t MergeAttention(cudaStream_t stream, std::span<const AttentionPart> parts, int64_t rows,
                           int32_t heads, int32_t head_dim, float* out, int64_t ld_out, float* lse,
                           int64_t ld_lse);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_SEQUENCE_KERNELS_H_
