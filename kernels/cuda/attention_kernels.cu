#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/mma_attention.h"
#include "kernels/cuda/paged_kv.cuh"
#include "kernels/cuda/row_attention.h"
#include "kernels/cuda/varlen_sequence.cuh"
#include "kernels/cuda/warp_math.cuh"

namespace tandem::kernels::cuda {
namespace {

// Row t goes to position start_pos + t of kv.pages, or (a decode batch, tables given) to
// positions[t] of page_tables[t].
__global__ void WriteKvKernel(const float* k, int64_t ld_k, const float* v, int64_t ld_v,
                              int64_t start_pos, PagedKv kv, float* const* const* page_tables,
                              const int64_t* positions) {
  const int64_t t = blockIdx.x;
  const int32_t width = kv.num_kv_heads * kv.head_dim;
  const int64_t pos = positions != nullptr ? positions[t] : start_pos + t;
  float* const* pages = page_tables != nullptr ? page_tables[t] : kv.pages;
  float* page = pages[pos / kv.page_tokens] + kv.layer_offset;
  const int64_t slot = pos % kv.page_tokens;
  for (int32_t e = threadIdx.x; e < width; e += blockDim.x) {
    const int32_t head = e / kv.head_dim, i = e % kv.head_dim;
    page[int64_t{head} * HeadBlock(kv) + slot * kv.head_dim + i] = k[t * ld_k + e];
    page[int64_t{kv.num_kv_heads + head} * HeadBlock(kv) + slot * kv.head_dim + i] =
        v[t * ld_v + e];
  }
}

// ---- tiled attention: many query rows over the same pages --------------------------------
//
// Where many rows attend over the same keys (a prefill chunk; Hydragen's shared prefix, whose
// rows come from many sequences), a block takes a tile of kTileQueries "virtual rows" (a query
// row and one head of its GQA group: the group's heads share the KV head, so they fold into
// rows) and walks the key range in tiles of kTileKeys keys staged in shared memory, so each key
// and value is read from global memory once per tile of rows instead of once per row. Scores
// and the online softmax (running max and sum per row, fp32) are those of the row kernels
// (row_attention.cu); only the order of the additions differs. 128 threads: 4 per virtual row, each
// scoring 4 keys of a tile and accumulating every 4th element of the row's output.
constexpr int kTileQueries = 32;
constexpr int kTileKeys = 16;
constexpr int kTileAttentionThreads = 128;
constexpr int kMaxTiledHeadDim = 128;
constexpr int kTileStride = kMaxTiledHeadDim + 1;  // staggers shared-memory banks across rows
// From this many virtual rows (rows × query heads per KV head) the tiled kernel is used.
constexpr int64_t kTiledAttentionMinRows = 16;

__device__ void AttendTile(const PartialAttentionArgs& a) {
  __shared__ float qs[kTileQueries][kTileStride];
  __shared__ float ks[kTileKeys][kTileStride];
  __shared__ float vs[kTileKeys][kTileStride];
  __shared__ float ps[kTileQueries][kTileKeys];
  const int32_t kv_head = blockIdx.y;
  const int32_t group = a.heads / a.kv.num_kv_heads;
  const int32_t dh = a.kv.head_dim;
  const int64_t virtual_rows = a.rows * group;
  const int64_t v0 = int64_t{blockIdx.x} * kTileQueries;
  const int row = threadIdx.x / 4, part = threadIdx.x % 4;
  const int64_t v = v0 + row;
  const bool live = v < virtual_rows;
  const int64_t t = live ? v / group : 0;
  const int32_t head = kv_head * group + static_cast<int32_t>(live ? v % group : 0);

  // The tile's queries, and how far each row (and the whole tile) reads.
  for (int i = threadIdx.x; i < kTileQueries * dh; i += kTileAttentionThreads) {
    const int r = i / dh, e = i % dh;
    const int64_t vr = v0 + r;
    float value = 0.0f;
    if (vr < virtual_rows) {
      const int64_t tr = vr / group;
      const int32_t hr = kv_head * group + static_cast<int32_t>(vr % group);
      value = a.q[tr * a.ld_q + int64_t{hr} * dh + e];
    }
    qs[r][e] = value;
  }
  auto limit_of = [&](int64_t query_row) {
    return a.causal ? min(a.key_end, a.start_pos + query_row + 1) : a.key_end;
  };
  const int64_t own_end = live ? limit_of(t) : a.key_begin;
  const int64_t last_t = min(virtual_rows, v0 + kTileQueries) - 1;
  const int64_t tile_end = limit_of(last_t / group);  // rows grow with t, so the last sees most
  __syncthreads();

  // Fully unrolled loops over acc keep it in registers (a loop that breaks early would index
  // it at run time and put it in local memory).
  constexpr int kPerThread = kMaxTiledHeadDim / 4;
  float acc[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) acc[i] = 0.0f;
  float running_max = -INFINITY, sum = 0.0f;
  for (int64_t k0 = a.key_begin; k0 < tile_end; k0 += kTileKeys) {
    for (int i = threadIdx.x; i < kTileKeys * dh; i += kTileAttentionThreads) {
      const int j = i / dh, e = i % dh;
      const int64_t pos = k0 + j;
      const bool in = pos < tile_end;
      ks[j][e] = in ? KeyAt(a.kv, pos, kv_head)[e] : 0.0f;
      vs[j][e] = in ? ValueAt(a.kv, pos, kv_head)[e] : 0.0f;
    }
    __syncthreads();
    float score[4];
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int j = part * 4 + jj;
      float dot = 0.0f;
      for (int e = 0; e < dh; ++e) dot += qs[row][e] * ks[j][e];
      score[jj] = k0 + j < own_end ? dot * a.scale : -INFINITY;
      tile_max = fmaxf(tile_max, score[jj]);
    }
    // The row's four threads are neighbouring lanes of one warp.
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(running_max, tile_max);
    float tile_sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const float p = new_max == -INFINITY ? 0.0f : expf(score[jj] - new_max);
      ps[row][part * 4 + jj] = p;
      tile_sum += p;
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 2);
    const float rescale = new_max == -INFINITY ? 1.0f : expf(running_max - new_max);
    sum = sum * rescale + tile_sum;
    running_max = new_max;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int e = part + 4 * i;
      if (e < dh) {
        float o = acc[i] * rescale;
#pragma unroll
        for (int j = 0; j < kTileKeys; ++j) o += ps[row][j] * vs[j][e];
        acc[i] = o;
      }
    }
    __syncthreads();
  }
  if (!live) return;
  float* orow = a.out + t * a.ld_out + int64_t{head} * dh;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int e = part + 4 * i;
    if (e < dh) orow[e] = sum > 0.0f ? acc[i] / sum : 0.0f;
  }
  if (part == 0 && a.lse != nullptr) {
    a.lse[t * a.ld_lse + head] = sum > 0.0f ? running_max + logf(sum) : -INFINITY;
  }
}

__global__ void TiledAttentionKernel(PartialAttentionArgs a) { AttendTile(a); }

// A varlen pass (AttentionArgs::cu_seqlens): blockIdx.z is the sequence, whose rows sit at
// consecutive positions over the pages of its first row; blocks past its rows return.
__global__ void VarlenTiledAttentionKernel(AttentionArgs a) {
  const PartialAttentionArgs p = SequenceOf(a, blockIdx.z);
  if (int64_t{blockIdx.x} * kTileQueries >= p.rows * (a.heads / a.kv.num_kv_heads)) return;
  AttendTile(p);
}

struct Parts {
  int count = 0;
  AttentionPart part[kMaxParts];
};

// One thread per (row, head, element); the weights are recomputed per element (parts are few).
__global__ void MergeKernel(Parts parts, int64_t rows, int32_t heads, int32_t head_dim, float* out,
                            int64_t ld_out, float* lse, int64_t ld_lse) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= rows * heads * head_dim) return;
  const int64_t t = e / (int64_t{heads} * head_dim);
  const int32_t head = static_cast<int32_t>(e / head_dim % heads), d = e % head_dim;
  float max_l = -INFINITY;
  for (int i = 0; i < parts.count; ++i) {
    max_l = fmaxf(max_l, parts.part[i].lse[t * parts.part[i].ld_lse + head]);
  }
  float value = 0.0f, total = 0.0f;
  if (max_l != -INFINITY) {
    for (int i = 0; i < parts.count; ++i) {
      const AttentionPart& p = parts.part[i];
      const float weight = expf(p.lse[t * p.ld_lse + head] - max_l);
      if (weight == 0.0f) continue;
      total += weight;
      value += weight * p.out[t * p.ld_out + int64_t{head} * head_dim + d];
    }
    value /= total;
  }
  // `out` may be parts[0].out: each thread reads and writes only its own element. `lse` may not
  // alias a part's lse (MergeAttention refuses it): other threads of this row and head may still
  // be reading it.
  out[t * ld_out + int64_t{head} * head_dim + d] = value;
  if (lse != nullptr && d == 0) {
    lse[t * ld_lse + head] = max_l == -INFINITY ? -INFINITY : max_l + logf(total);
  }
}

// The tiled kernels' case: many virtual rows over one sequence's keys (on the tensor cores where
// MmaAttentionTakes the call, else the CUDA-core AttendTile).
bool PartialAttentionIsTiled(const PartialAttentionArgs& a) {
  const int64_t virtual_rows = a.rows * (a.heads / a.kv.num_kv_heads);
  return a.page_tables == nullptr && a.kv.head_dim <= kMaxTiledHeadDim &&
         virtual_rows >= kTiledAttentionMinRows;
}

// A varlen pass whose sequences attend tile by tile.
bool DecodeAttentionIsTiled(const AttentionArgs& a) {
  const int64_t group = a.heads / a.kv.num_kv_heads;
  return a.sequences > 0 && a.cu_seqlens != nullptr && a.kv.head_dim <= kMaxTiledHeadDim &&
         a.max_seqlen * group >= kTiledAttentionMinRows;
}

// What every launch over rows with their own tables (AttentionArgs::page_tables) needs.
bool RowTablesValid(const AttentionArgs& a) {
  return a.page_tables != nullptr && a.positions != nullptr && a.kv.num_kv_heads > 0 &&
         a.heads % a.kv.num_kv_heads == 0 && a.kv.head_dim >= 1 && a.kv.head_dim <= kMaxHeadDim &&
         a.kv.page_tokens > 0;
}

// The rows' queries and outputs, which both args structs name alike, over `keys`.
template <typename Args>
RowAttention RowsOver(const RowKeys& keys, int64_t rows, const Args& a) {
  RowAttention r;
  r.keys = keys;
  r.kv = a.kv;
  r.rows = rows;
  r.heads = a.heads;
  r.q = a.q;
  r.ld_q = a.ld_q;
  r.scale = a.scale;
  r.out = a.out;
  r.ld_out = a.ld_out;
  return r;
}

}  // namespace

cudaError_t WriteKv(cudaStream_t stream, const float* k, int64_t ld_k, const float* v, int64_t ld_v,
                    int64_t tokens, int64_t start_pos, const PagedKv& kv) {
  if (tokens <= 0) return cudaSuccess;
  if (tokens > INT32_MAX || kv.page_tokens <= 0) return cudaErrorInvalidValue;
  WriteKvKernel<<<static_cast<unsigned>(tokens), 128, 0, stream>>>(k, ld_k, v, ld_v, start_pos, kv,
                                                                   nullptr, nullptr);
  return cudaGetLastError();
}

cudaError_t WriteKvAt(cudaStream_t stream, const float* k, int64_t ld_k, const float* v,
                      int64_t ld_v, int64_t rows, float* const* const* page_tables,
                      const int64_t* positions, const PagedKv& kv) {
  if (rows <= 0) return cudaSuccess;
  if (rows > INT32_MAX || kv.page_tokens <= 0 || page_tables == nullptr || positions == nullptr) {
    return cudaErrorInvalidValue;
  }
  WriteKvKernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(k, ld_k, v, ld_v, 0, kv,
                                                                 page_tables, positions);
  return cudaGetLastError();
}

int PartialAttentionSplits(const PartialAttentionArgs& a, int multiprocessors) {
  if (a.rows <= 0 || a.kv.num_kv_heads <= 0) return 1;
  if (MmaAttentionTakes(a)) return MmaAttentionSplits(a, multiprocessors);
  if (PartialAttentionIsTiled(a)) return 1;
  return RowAttentionSplits(a.rows, a.kv.num_kv_heads, multiprocessors);
}

cudaError_t PartialAttention(cudaStream_t stream, const PartialAttentionArgs& a,
                             const KeySplits& splits, TensorCorePrecision precision,
                             AttentionKernels kernels) {
  const int64_t items = a.rows * a.heads;
  if (items <= 0) return cudaSuccess;
  if (a.kv.head_dim <= 0 || a.kv.head_dim > kMaxHeadDim || a.kv.num_kv_heads <= 0 ||
      a.heads % a.kv.num_kv_heads != 0 || a.kv.page_tokens <= 0 ||
      (a.page_tables != nullptr && (a.key_begins == nullptr || a.key_ends == nullptr))) {
    return cudaErrorInvalidValue;
  }
  const bool same_for_every_row = kernels == AttentionKernels::kSameForEveryRow;
  if (same_for_every_row) {
    if (splits.count != 1) return cudaErrorInvalidValue;
    if (MmaAttentionFits(a)) return LaunchMmaAttention(stream, a, splits, precision);
  } else if (MmaAttentionTakes(a)) {
    return LaunchMmaAttention(stream, a, splits, precision);
  }
  if (!same_for_every_row && PartialAttentionIsTiled(a)) {
    if (splits.count != 1) return cudaErrorInvalidValue;
    const int64_t virtual_rows = items / a.kv.num_kv_heads;  // rows × query heads per KV head
    const dim3 grid(Blocks(virtual_rows, kTileQueries), static_cast<unsigned>(a.kv.num_kv_heads));
    TiledAttentionKernel<<<grid, kTileAttentionThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  const RowKeys keys =
      a.page_tables == nullptr
          ? RowKeys{.pages = a.kv.pages,
                    .key_begin = a.key_begin,
                    .key_end = a.key_end,
                    .start_pos = a.start_pos,
                    .causal = a.causal}
          : RowKeys{.page_tables = a.page_tables, .begins = a.key_begins, .ends = a.key_ends};
  RowAttention r = RowsOver(keys, a.rows, a);
  r.lse = a.lse;
  r.ld_lse = a.ld_lse;
  return LaunchRowAttention(stream, r, splits);
}

int DecodeAttentionSplits(const AttentionArgs& a, int multiprocessors) {
  if (a.page_tables == nullptr || a.tokens <= 0 || a.kv.num_kv_heads <= 0 ||
      DecodeAttentionIsTiled(a)) {
    return 1;
  }
  return RowAttentionSplits(a.tokens, a.kv.num_kv_heads, multiprocessors);
}

cudaError_t DecodeAttention(cudaStream_t stream, const AttentionArgs& a, const KeySplits& splits,
                            TensorCorePrecision precision, AttentionKernels kernels) {
  const int64_t items = a.tokens * a.heads;
  if (items <= 0) return cudaSuccess;
  if (!RowTablesValid(a)) return cudaErrorInvalidValue;
  if (kernels == AttentionKernels::kSameForEveryRow) {
    if (splits.count != 1) return cudaErrorInvalidValue;
    if (VarlenMmaAttentionFits(a)) return LaunchVarlenMmaAttention(stream, a, precision);
    // The row kernel, as a prefill's rows take it where the tiles do not fit.
    const RowAttention r =
        RowsOver(RowKeys{.page_tables = a.page_tables, .positions = a.positions}, a.tokens, a);
    return LaunchRowAttention(stream, r, splits);
  }
  if (DecodeAttentionIsTiled(a)) {
    // Sequences with many rows (prefill chunks) attend tile by tile.
    if (splits.count == 1 && VarlenMmaAttentionTakes(a)) {
      return LaunchVarlenMmaAttention(stream, a, precision);
    }
    const int64_t group = a.heads / a.kv.num_kv_heads;
    if (splits.count != 1 || a.sequences > 65535 || a.kv.num_kv_heads > 65535) {
      return cudaErrorInvalidValue;
    }
    const dim3 grid(Blocks(a.max_seqlen * group, kTileQueries),
                    static_cast<unsigned>(a.kv.num_kv_heads), static_cast<unsigned>(a.sequences));
    VarlenTiledAttentionKernel<<<grid, kTileAttentionThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  const RowAttention r =
      RowsOver(RowKeys{.page_tables = a.page_tables, .positions = a.positions}, a.tokens, a);
  return LaunchRowAttention(stream, r, splits);
}

cudaError_t MergeAttention(cudaStream_t stream, std::span<const AttentionPart> parts, int64_t rows,
                           int32_t heads, int32_t head_dim, float* out, int64_t ld_out, float* lse,
                           int64_t ld_lse) {
  const int64_t items = rows * heads * head_dim;
  if (items <= 0) return cudaSuccess;
  if (parts.empty() || parts.size() > static_cast<size_t>(kMaxParts)) return cudaErrorInvalidValue;
  Parts p;
  p.count = static_cast<int>(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    // The merged lse is written while other threads may still read the parts' lse.
    if (lse != nullptr && parts[i].lse == lse) return cudaErrorInvalidValue;
    p.part[i] = parts[i];
  }
  constexpr int kThreads = 256;
  MergeKernel<<<Blocks(items, kThreads), kThreads, 0, stream>>>(p, rows, heads, head_dim, out,
                                                                ld_out, lse, ld_lse);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda
