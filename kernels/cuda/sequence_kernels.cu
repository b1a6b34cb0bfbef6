#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/sequence_kernels.h"

namespace tandem::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;

// Where to copy a state, by value in the kernel's parameters.
struct Snapshots {
  int count = 0;
  int64_t after[kMaxSnapshots];
  float* dst[kMaxSnapshots];
};

// A state of no floats (a convolution of width 1) is copied nowhere, so its snapshots may have
// no destination.
bool ToSnapshots(std::span<const StateSnapshot> in, int64_t tokens, bool empty_state,
                 Snapshots* out) {
  if (in.size() > static_cast<size_t>(kMaxSnapshots)) return false;
  out->count = static_cast<int>(in.size());
  int64_t previous = -1;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].after_tokens < previous || in[i].after_tokens > tokens ||
        (in[i].dst == nullptr && !empty_state)) {
      return false;
    }
    previous = in[i].after_tokens;
    out->after[i] = in[i].after_tokens;
    out->dst[i] = in[i].dst;
  }
  return true;
}

__device__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The rows, state and snapshots one block works on: the whole call with the by-value list, a
// decode batch's row (blockIdx.y = the sequence; no snapshots), or a varlen call's sequence
// (blockIdx.y) with its entries of the flat snapshot table. The by-value list stays the kernel
// parameter it is (read through the accessors below): holding its address would copy all of it
// into every thread's local memory.
struct Rows {
  float* state;
  int64_t first;
  int64_t tokens;
  const BlockSnapshot* flat;  // null: the by-value list
  int64_t flat_offset;        // floats into each flat entry's block
  int flat_count;
};

template <typename Args>
__device__ Rows RowsOf(const Args& a) {
  if (a.state_table == nullptr) return {a.state, 0, a.tokens, nullptr, 0, 0};
  const int64_t seq = blockIdx.y;
  float* state = a.state_table[seq] + a.state_offset;
  const VarlenSequences& v = a.sequences;
  if (v.count == 0) return {state, seq, 1, nullptr, 0, 0};  // the by-value list is empty
  const int64_t first = v.cu_seqlens[seq];
  const int64_t tokens = v.cu_seqlens[seq + 1] - first;
  if (v.cu_snapshots == nullptr) return {state, first, tokens, v.snapshots, 0, 0};
  const int32_t begin = v.cu_snapshots[seq];
  const int count = v.cu_snapshots[seq + 1] - begin;
  return {state, first, tokens, v.snapshots + begin, a.state_offset, count};
}

__device__ __forceinline__ int SnapshotCount(const Rows& rows, const Snapshots& snaps) {
  return rows.flat != nullptr ? rows.flat_count : snaps.count;
}
__device__ __forceinline__ int64_t SnapshotAfter(const Rows& rows, const Snapshots& snaps, int i) {
  return rows.flat != nullptr ? rows.flat[i].after_tokens : snaps.after[i];
}
__device__ __forceinline__ float* SnapshotDst(const Rows& rows, const Snapshots& snaps, int i) {
  return rows.flat != nullptr ? rows.flat[i].block + rows.flat_offset : snaps.dst[i];
}

__device__ float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ float Silu(float x) { return x / (1.0f + expf(-x)); }

// ---- causal conv1d: one thread per channel, the K-1 previous inputs in registers ----------

__global__ void ConvKernel(CausalConvArgs a, Snapshots snaps) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= a.channels) return;
  const Rows rows = RowsOf(a);
  const int K = a.kernel, C = a.channels;
  float window[kMaxConvKernel];  // window[0 .. K-2]: the previous inputs, oldest first
  for (int i = 0; i + 1 < K; ++i) window[i] = rows.state[int64_t{i} * C + c];
  float w[kMaxConvKernel];
  for (int i = 0; i < K; ++i) w[i] = a.weight[c * K + i];
  const float bias = a.bias != nullptr ? a.bias[c] : 0.0f;
  int next = 0;
  auto emit = [&](int64_t done) {
    while (next < SnapshotCount(rows, snaps) && SnapshotAfter(rows, snaps, next) == done) {
      float* dst = SnapshotDst(rows, snaps, next);
      for (int i = 0; i + 1 < K; ++i) dst[int64_t{i} * C + c] = window[i];
      ++next;
    }
  };
  emit(0);
  for (int64_t t = rows.first; t < rows.first + rows.tokens; ++t) {
    const float u = a.u[t * a.ld_u + c];
    float s = bias;
    for (int i = 0; i + 1 < K; ++i) s += w[i] * window[i];
    s += w[K - 1] * u;
    a.out[t * a.ld_out + c] = a.silu ? Silu(s) : s;
    for (int i = 0; i + 2 < K; ++i) window[i] = window[i + 1];
    if (K > 1) window[K - 2] = u;
    emit(t - rows.first + 1);
  }
  for (int i = 0; i + 1 < K; ++i) rows.state[int64_t{i} * C + c] = window[i];
}

// ---- scans: one warp per recurrence row (a channel d, or a head's (h, p)), lanes over N ------

constexpr int kMaxStatePerLane = 8;  // N ≤ 256

// Copies the warp's row of state (held kMaxStatePerLane per lane, n = lane + 32·i) to `row`.
__device__ void StoreRow(const float (&h)[kMaxStatePerLane], int32_t n_state, float* row) {
  const int lane = threadIdx.x % kWarp;
  for (int i = 0; i < kMaxStatePerLane; ++i) {
    const int n = lane + kWarp * i;
    if (n < n_state) row[n] = h[i];
  }
}

__global__ void SelectiveScanKernel(SelectiveScanArgs a, Snapshots snaps) {
  const int64_t d = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  if (d >= a.inner) return;
  const Rows rows = RowsOf(a);
  const int lane = threadIdx.x % kWarp;
  const int32_t N = a.state_size;
  float h[kMaxStatePerLane], A[kMaxStatePerLane];
  for (int i = 0; i < kMaxStatePerLane; ++i) {
    const int n = lane + kWarp * i;
    h[i] = n < N ? rows.state[d * N + n] : 0.0f;
    A[i] = n < N ? a.a[d * N + n] : 0.0f;
  }
  const int64_t row_offset = d * N;
  int next = 0;
  auto emit = [&](int64_t done) {
    while (next < SnapshotCount(rows, snaps) && SnapshotAfter(rows, snaps, next) == done) {
      StoreRow(h, N, SnapshotDst(rows, snaps, next) + row_offset);
      ++next;
    }
  };
  emit(0);
  for (int64_t t = rows.first; t < rows.first + rows.tokens; ++t) {
    const float u = a.u[t * a.ld_u + d];
    const float dt = Softplus(a.delta[t * a.ld_delta + d] + a.delta_bias[d]);
    const float* bt = a.b + t * a.ld_b;
    const float* ct = a.c + t * a.ld_c;
    float acc = 0.0f;
    for (int i = 0; i < kMaxStatePerLane; ++i) {
      const int n = lane + kWarp * i;
      if (n < N) {
        h[i] = expf(dt * A[i]) * h[i] + dt * bt[n] * u;
        acc += h[i] * ct[n];
      }
    }
    acc = WarpSum(acc);
    if (lane == 0) {
      float y = acc + a.d[d] * u;
      if (a.z != nullptr) y *= Silu(a.z[t * a.ld_z + d]);
      a.y[t * a.ld_y + d] = y;
    }
    emit(t - rows.first + 1);
  }
  StoreRow(h, N, rows.state + row_offset);
}

__device__ float SsdDt(float raw, float bias, float dt_min, float dt_max) {
  float dt = Softplus(raw + bias);
  if (dt < dt_min) dt = dt_min;
  if (dt_max > 0.0f && dt_max < INFINITY && dt > dt_max) dt = dt_max;
  return dt;
}

__global__ void SsdScanKernel(SsdScanArgs a, Snapshots snaps) {
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;  // h·P + p
  const int64_t H = a.heads, P = a.head_dim;
  if (row >= H * P) return;
  const Rows rows = RowsOf(a);
  const int lane = threadIdx.x % kWarp;
  const int64_t hd = row / P;
  const int64_t g = hd / (H / a.groups);
  const int32_t N = a.state_size;
  float s[kMaxStatePerLane];
  for (int i = 0; i < kMaxStatePerLane; ++i) {
    const int n = lane + kWarp * i;
    s[i] = n < N ? rows.state[row * N + n] : 0.0f;
  }
  int next = 0;
  auto emit = [&](int64_t done) {
    while (next < SnapshotCount(rows, snaps) && SnapshotAfter(rows, snaps, next) == done) {
      StoreRow(s, N, SnapshotDst(rows, snaps, next) + row * N);
      ++next;
    }
  };
  emit(0);
  for (int64_t t = rows.first; t < rows.first + rows.tokens; ++t) {
    const float dt = SsdDt(a.dt[t * a.ld_dt + hd], a.dt_bias[hd], a.dt_min, a.dt_max);
    const float decay = expf(dt * a.a[hd]);
    const float x = a.x[t * a.ld_x + row];
    const float* bt = a.b + t * a.ld_b + g * N;
    const float* ct = a.c + t * a.ld_c + g * N;
    float acc = 0.0f;
    for (int i = 0; i < kMaxStatePerLane; ++i) {
      const int n = lane + kWarp * i;
      if (n < N) {
        s[i] = decay * s[i] + dt * x * bt[n];
        acc += s[i] * ct[n];
      }
    }
    acc = WarpSum(acc);
    if (lane == 0) a.y[t * a.ld_y + row] = acc + a.d[hd] * x;
    emit(t - rows.first + 1);
  }
  StoreRow(s, N, rows.state + row * N);
}

// ---- paged attention ------------------------------------------------------------------------

// PagedKv::head_block() is host code; the same product for the device.
__device__ int64_t HeadBlock(const PagedKv& kv) { return int64_t{kv.page_tokens} * kv.head_dim; }

__device__ const float* KeyAt(const PagedKv& kv, int64_t pos, int32_t head) {
  return kv.pages[pos / kv.page_tokens] + kv.layer_offset + int64_t{head} * HeadBlock(kv) +
         (pos % kv.page_tokens) * kv.head_dim;
}
__device__ const float* ValueAt(const PagedKv& kv, int64_t pos, int32_t head) {
  return KeyAt(kv, pos, kv.num_kv_heads + head);
}

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

// Attention of one query row for one head, by one warp: lanes hold head_dim/32 elements of q and
// of the running output; keys [begin, end) of `kv` are visited in order with an online softmax
// (running max and sum in fp32). `lse` (one value) may be null.
__device__ void AttendRow(const float* qrow, const PagedKv& kv, int32_t kv_head, int64_t begin,
                          int64_t end, float scale, float* orow, float* lse) {
  const int lane = threadIdx.x % kWarp;
  const int32_t dh = kv.head_dim;
  constexpr int kPerLane = kMaxHeadDim / kWarp;
  float q[kPerLane], acc[kPerLane];
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + kWarp * i;
    q[i] = e < dh ? qrow[e] : 0.0f;
    acc[i] = 0.0f;
  }
  float running_max = -INFINITY, sum = 0.0f;
  for (int64_t pos = begin; pos < end; ++pos) {
    const float* key = KeyAt(kv, pos, kv_head);
    float dot = 0.0f;
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + kWarp * i;
      if (e < dh) dot += q[i] * key[e];
    }
    const float score = WarpSum(dot) * scale;
    const float new_max = fmaxf(running_max, score);
    const float rescale = expf(running_max - new_max);  // 0 on the first key (exp(-inf))
    const float weight = expf(score - new_max);
    sum = sum * rescale + weight;
    const float* value = ValueAt(kv, pos, kv_head);
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + kWarp * i;
      if (e < dh) acc[i] = acc[i] * rescale + weight * value[e];
    }
    running_max = new_max;
  }
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + kWarp * i;
    if (e < dh) orow[e] = sum > 0.0f ? acc[i] / sum : 0.0f;
  }
  if (lane == 0 && lse != nullptr) *lse = sum > 0.0f ? running_max + logf(sum) : -INFINITY;
}

// One warp per (row, query head).
__global__ void PartialAttentionKernel(PartialAttentionArgs a) {
  const int64_t item = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  if (item >= a.rows * a.heads) return;
  const int64_t t = item / a.heads;
  const int32_t head = static_cast<int32_t>(item % a.heads);
  const int32_t kv_head = head / (a.heads / a.kv.num_kv_heads);
  const int32_t dh = a.kv.head_dim;
  PagedKv kv = a.kv;
  int64_t begin = a.key_begin, end = a.key_end;
  if (a.causal) end = min(end, a.start_pos + t + 1);
  if (a.page_tables != nullptr) {  // a batch: the row's own pages and range
    kv.pages = a.page_tables[t];
    begin = a.key_begins[t];
    end = a.key_ends[t];
  }
  AttendRow(a.q + t * a.ld_q + int64_t{head} * dh, kv, kv_head, begin, end, a.scale,
            a.out + t * a.ld_out + int64_t{head} * dh,
            a.lse != nullptr ? a.lse + t * a.ld_lse + head : nullptr);
}

// ---- tiled attention: many query rows over the same pages --------------------------------
//
// Where many rows attend over the same keys (a prefill chunk; Hydragen's shared prefix, whose
// rows come from many sequences), a block takes a tile of kTileQueries "virtual rows" (a query
// row and one head of its GQA group: the group's heads share the KV head, so they fold into
// rows) and walks the key range in tiles of kTileKeys keys staged in shared memory, so each key
// and value is read from global memory once per tile of rows instead of once per row. Scores
// and the online softmax (running max and sum per row, fp32) are those of AttendRow; only the
// order of the additions differs. 128 threads: 4 per virtual row, each scoring 4 keys of a tile
// and accumulating every 4th element of the row's output.
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
  const int64_t seq = blockIdx.z;
  const int64_t first = a.cu_seqlens[seq] - a.cu_seqlens[0];
  const int64_t rows = a.cu_seqlens[seq + 1] - a.cu_seqlens[seq];
  const int32_t group = a.heads / a.kv.num_kv_heads;
  if (int64_t{blockIdx.x} * kTileQueries >= rows * group) return;
  PartialAttentionArgs p;
  p.rows = rows;
  p.start_pos = a.positions[first];
  p.causal = true;
  p.heads = a.heads;
  p.q = a.q + first * a.ld_q;
  p.ld_q = a.ld_q;
  p.kv = a.kv;
  p.kv.pages = a.page_tables[first];
  p.key_begin = 0;
  p.key_end = p.start_pos + rows;
  p.scale = a.scale;
  p.out = a.out + first * a.ld_out;
  p.ld_out = a.ld_out;
  AttendTile(p);
}

// A decode batch (AttentionArgs::page_tables): one warp per (row, query head), each row over
// its own sequence's pages up to its position. With the keys split (flash-decoding), blockIdx.y
// is the split: row t's keys [0, positions[t]] are cut into `splits` ranges of at least
// kMinSplitKeys keys, and each split writes its part (at split_floats / split_lse apart, the
// lse included) for the merge after. Unsplit (splits == 1), the row goes straight to a.out.
constexpr int64_t kMinSplitKeys = 256;

__global__ void DecodeAttentionKernel(AttentionArgs a, int splits, float* out, int64_t ld_out,
                                      int64_t split_floats, float* lse, int64_t split_lse) {
  const int64_t item = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  if (item >= a.tokens * a.heads) return;
  const int64_t t = item / a.heads;
  const int32_t head = static_cast<int32_t>(item % a.heads);
  const int32_t kv_head = head / (a.heads / a.kv.num_kv_heads);
  const int32_t dh = a.kv.head_dim;
  const int64_t keys = a.positions[t] + 1;
  int64_t chunk = (keys + splits - 1) / splits;
  if (chunk < kMinSplitKeys) chunk = kMinSplitKeys;
  const int64_t begin = min(keys, int64_t{blockIdx.y} * chunk);
  const int64_t end = min(keys, begin + chunk);
  PagedKv kv = a.kv;
  kv.pages = a.page_tables[t];
  AttendRow(a.q + t * a.ld_q + int64_t{head} * dh, kv, kv_head, begin, end, a.scale,
            out + blockIdx.y * split_floats + t * ld_out + int64_t{head} * dh,
            lse != nullptr ? lse + blockIdx.y * split_lse + t * a.heads + head : nullptr);
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

unsigned Blocks(int64_t items, int64_t per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

// The grid of a recurrent op: `blocks` per sequence, one sequence per y index in a decode
// batch (whose snapshot list must be empty: validated as one) or a varlen call (whose snapshots
// are in its flat table, read by the kernel).
template <typename Args>
bool Grid(const Args& a, unsigned blocks, dim3* grid, std::span<const StateSnapshot>* snapshots) {
  if (a.state_table == nullptr) {
    if (a.sequences.count != 0) return false;
    *grid = dim3(blocks, 1);
    *snapshots = a.snapshots;
    return true;
  }
  const int64_t sequences = a.sequences.count > 0 ? a.sequences.count : a.tokens;
  if (sequences > 65535 || (a.sequences.count > 0 && a.sequences.cu_seqlens == nullptr) ||
      (a.sequences.cu_snapshots != nullptr && a.sequences.snapshots == nullptr)) {
    return false;
  }
  *grid = dim3(blocks, static_cast<unsigned>(sequences));
  *snapshots = {};
  return true;
}

}  // namespace

cudaError_t CausalConv1d(cudaStream_t stream, const CausalConvArgs& a) {
  if (a.channels <= 0) return cudaSuccess;
  constexpr int kThreads = 128;
  Snapshots snaps;
  dim3 grid;
  std::span<const StateSnapshot> snapshots;
  if (a.kernel < 1 || a.kernel > kMaxConvKernel ||
      !Grid(a, Blocks(a.channels, kThreads), &grid, &snapshots) ||
      !ToSnapshots(snapshots, a.tokens, a.kernel == 1, &snaps)) {
    return cudaErrorInvalidValue;
  }
  ConvKernel<<<grid, kThreads, 0, stream>>>(a, snaps);
  return cudaGetLastError();
}

cudaError_t SelectiveScan(cudaStream_t stream, const SelectiveScanArgs& a) {
  if (a.inner <= 0) return cudaSuccess;
  Snapshots snaps;
  dim3 grid;
  std::span<const StateSnapshot> snapshots;
  if (a.state_size < 1 || a.state_size > kWarp * kMaxStatePerLane ||
      !Grid(a, Blocks(a.inner, kWarpsPerBlock), &grid, &snapshots) ||
      !ToSnapshots(snapshots, a.tokens, false, &snaps)) {
    return cudaErrorInvalidValue;
  }
  SelectiveScanKernel<<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(a, snaps);
  return cudaGetLastError();
}

cudaError_t SsdScan(cudaStream_t stream, const SsdScanArgs& a) {
  const int64_t rows = int64_t{a.heads} * a.head_dim;
  if (rows <= 0) return cudaSuccess;
  Snapshots snaps;
  dim3 grid;
  std::span<const StateSnapshot> snapshots;
  if (a.state_size < 1 || a.state_size > kWarp * kMaxStatePerLane || a.groups < 1 ||
      a.heads % a.groups != 0 || !Grid(a, Blocks(rows, kWarpsPerBlock), &grid, &snapshots) ||
      !ToSnapshots(snapshots, a.tokens, false, &snaps)) {
    return cudaErrorInvalidValue;
  }
  SsdScanKernel<<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(a, snaps);
  return cudaGetLastError();
}

cudaError_t WriteKv(cudaStream_t stream, const float* k, int64_t ld_k, const float* v,
                    int64_t ld_v, int64_t tokens, int64_t start_pos, const PagedKv& kv) {
  if (tokens <= 0) return cudaSuccess;
  if (tokens > INT32_MAX || kv.page_tokens <= 0) return cudaErrorInvalidValue;
  WriteKvKernel<<<static_cast<unsigned>(tokens), 128, 0, stream>>>(k, ld_k, v, ld_v, start_pos,
                                                                  kv, nullptr, nullptr);
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

cudaError_t PartialAttention(cudaStream_t stream, const PartialAttentionArgs& a) {
  const int64_t items = a.rows * a.heads;
  if (items <= 0) return cudaSuccess;
  if (a.kv.head_dim <= 0 || a.kv.head_dim > kMaxHeadDim || a.kv.num_kv_heads <= 0 ||
      a.heads % a.kv.num_kv_heads != 0 || a.kv.page_tokens <= 0 ||
      (a.page_tables != nullptr && (a.key_begins == nullptr || a.key_ends == nullptr))) {
    return cudaErrorInvalidValue;
  }
  const int64_t virtual_rows = items / a.kv.num_kv_heads;  // rows × query heads per KV head
  if (a.page_tables == nullptr && a.kv.head_dim <= kMaxTiledHeadDim &&
      virtual_rows >= kTiledAttentionMinRows) {
    const dim3 grid(Blocks(virtual_rows, kTileQueries), static_cast<unsigned>(a.kv.num_kv_heads));
    TiledAttentionKernel<<<grid, kTileAttentionThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  PartialAttentionKernel<<<Blocks(items, kWarpsPerBlock), kWarpsPerBlock * kWarp, 0, stream>>>(a);
  return cudaGetLastError();
}

namespace {

// What every launch over rows with their own tables (AttentionArgs::page_tables) needs.
bool RowTablesValid(const AttentionArgs& a) {
  return a.page_tables != nullptr && a.positions != nullptr && a.kv.num_kv_heads > 0 &&
         a.heads % a.kv.num_kv_heads == 0 && a.kv.head_dim >= 1 &&
         a.kv.head_dim <= kMaxHeadDim && a.kv.page_tokens > 0;
}

}  // namespace

cudaError_t DecodeAttention(cudaStream_t stream, const AttentionArgs& a) {
  const int64_t items = a.tokens * a.heads;
  if (items <= 0) return cudaSuccess;
  if (!RowTablesValid(a)) return cudaErrorInvalidValue;
  // Sequences with many rows (prefill chunks) attend tile by tile; decode rows, a warp each.
  const int64_t group = a.heads / a.kv.num_kv_heads;
  if (a.sequences > 0 && a.cu_seqlens != nullptr && a.kv.head_dim <= kMaxTiledHeadDim &&
      a.max_seqlen * group >= kTiledAttentionMinRows) {
    if (a.sequences > 65535 || a.kv.num_kv_heads > 65535) return cudaErrorInvalidValue;
    const dim3 grid(Blocks(a.max_seqlen * group, kTileQueries),
                    static_cast<unsigned>(a.kv.num_kv_heads), static_cast<unsigned>(a.sequences));
    VarlenTiledAttentionKernel<<<grid, kTileAttentionThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  DecodeAttentionKernel<<<Blocks(items, kWarpsPerBlock), kWarpsPerBlock * kWarp, 0, stream>>>(
      a, 1, a.out, a.ld_out, 0, nullptr, 0);
  return cudaGetLastError();
}

int DecodeAttentionSplits(const AttentionArgs& a, int multiprocessors) {
  const int64_t group = a.kv.num_kv_heads > 0 ? a.heads / a.kv.num_kv_heads : 1;
  const bool tiled = a.sequences > 0 && a.cu_seqlens != nullptr &&
                     a.kv.head_dim <= kMaxTiledHeadDim &&
                     a.max_seqlen * group >= kTiledAttentionMinRows;
  if (a.page_tables == nullptr || tiled || a.tokens <= 0) return 1;
  // Enough warps to give every multiprocessor about 16, in at most kMaxParts splits.
  const int64_t warps = a.tokens * a.heads;
  const int64_t wanted = (int64_t{multiprocessors} * 16 + warps - 1) / warps;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(wanted, 1), kMaxParts));
}

cudaError_t SplitDecodeAttention(cudaStream_t stream, const AttentionArgs& a, int splits,
                                 float* partial_out, float* partial_lse) {
  const int64_t items = a.tokens * a.heads;
  if (items <= 0) return cudaSuccess;
  if (splits < 1 || splits > kMaxParts || !RowTablesValid(a)) return cudaErrorInvalidValue;
  const int64_t width = int64_t{a.heads} * a.kv.head_dim;
  const dim3 grid(Blocks(items, kWarpsPerBlock), static_cast<unsigned>(splits));
  DecodeAttentionKernel<<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(
      a, splits, partial_out, width, a.tokens * width, partial_lse, a.tokens * a.heads);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  AttentionPart parts[kMaxParts];
  for (int i = 0; i < splits; ++i) {
    parts[i] = {partial_out + i * a.tokens * width, width, partial_lse + i * a.tokens * a.heads,
                a.heads};
  }
  return MergeAttention(stream, {parts, static_cast<size_t>(splits)}, a.tokens, a.heads,
                        a.kv.head_dim, a.out, a.ld_out, nullptr, 0);
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
