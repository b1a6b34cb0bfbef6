#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/cuda/sequence_kernels.h"
#include "kernels/cuda/warp_math.cuh"

namespace tandem::kernels::cuda {
namespace {

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
  int64_t previous = 0;  // positions are counts of tokens: none is negative
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

// The next snapshot of a row's list, with its position held in a register: the check after each
// token is one comparison, and the list (kernel parameters, or the flat table in device memory)
// is read only when a snapshot is taken. `after` is -1 past the end of the list.
struct SnapshotCursor {
  int index = 0;
  int64_t after = -1;
};
__device__ __forceinline__ SnapshotCursor CursorAt(const Rows& rows, const Snapshots& snaps,
                                                   int i) {
  return {i, i < SnapshotCount(rows, snaps) ? SnapshotAfter(rows, snaps, i) : -1};
}

__device__ float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ float Silu(float x) { return x / (1.0f + expf(-x)); }

// Tokens per tile of the convolution and the scans. A tile's inputs are all loaded before its
// first token is computed, and its outputs stored after: the loads are then in flight together,
// and a tile waits out one memory round trip where each token did (a token's loads could not be
// issued before the previous token's stores, which might alias them).
constexpr int kTile = 8;

// ---- causal conv1d: one thread per channel, the K-1 previous inputs in registers ----------
//
// The width is a template argument: with a width known only at run time the window could not be
// indexed in registers and lived in local memory.

template <int K>
__global__ void ConvKernel(CausalConvArgs a, Snapshots snaps) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= a.channels) return;
  const Rows rows = RowsOf(a);
  const int C = a.channels;
  float window[K];  // window[0 .. K-2]: the previous inputs, oldest first
#pragma unroll
  for (int i = 0; i + 1 < K; ++i) window[i] = rows.state[int64_t{i} * C + c];
  float w[K];
#pragma unroll
  for (int i = 0; i < K; ++i) w[i] = a.weight[c * K + i];
  const float bias = a.bias != nullptr ? a.bias[c] : 0.0f;
  SnapshotCursor next = CursorAt(rows, snaps, 0);
  auto emit = [&](int64_t done) {
    while (next.after == done) {
      float* dst = SnapshotDst(rows, snaps, next.index);
#pragma unroll
      for (int i = 0; i + 1 < K; ++i) dst[int64_t{i} * C + c] = window[i];
      next = CursorAt(rows, snaps, next.index + 1);
    }
  };
  emit(0);
  const int64_t end = rows.first + rows.tokens;
  for (int64_t t0 = rows.first; t0 < end; t0 += kTile) {
    const int count = static_cast<int>(min(int64_t{kTile}, end - t0));
    float u[kTile];
#pragma unroll
    for (int k = 0; k < kTile; ++k) u[k] = k < count ? a.u[(t0 + k) * a.ld_u + c] : 0.0f;
#pragma unroll
    for (int k = 0; k < kTile; ++k) {
      if (k >= count) break;
      float s = bias;
#pragma unroll
      for (int i = 0; i + 1 < K; ++i) s = __fmaf_rn(w[i], window[i], s);
      s = __fmaf_rn(w[K - 1], u[k], s);
      a.out[(t0 + k) * a.ld_out + c] = a.silu ? Silu(s) : s;
#pragma unroll
      for (int i = 0; i + 2 < K; ++i) window[i] = window[i + 1];
      if constexpr (K > 1) window[K - 2] = u[k];
      emit(t0 + k - rows.first + 1);
    }
  }
#pragma unroll
  for (int i = 0; i + 1 < K; ++i) rows.state[int64_t{i} * C + c] = window[i];
}

// The convolution kernel of width k, 1 ≤ k ≤ kMaxConvKernel.
using ConvKernelFn = void (*)(CausalConvArgs, Snapshots);
template <int... kWidths>
ConvKernelFn ConvKernelOfWidth(int k, std::integer_sequence<int, kWidths...>) {
  constexpr ConvKernelFn kernels[] = {ConvKernel<kWidths + 1>...};
  return kernels[k - 1];
}

// ---- scans: one warp per kRows recurrence rows (channels d, or a head's (h, p)), lanes over N --
//
// A row's state is kStates floats per lane (state n = lane + 32·i). Per tile, lane k computes
// token k's scalars (its step size, and for the SSD its decay: one softplus and exp per token,
// not one per lane), every lane loads its states' B and C for the whole tile, then the warp runs
// the tile's recurrence from registers, broadcasting token k's scalars from lane k. The
// arithmetic per token is the one-token call's, in the same order: a scan of T tokens gives the
// bits of T decode steps. The order is spelled out in intrinsics (__fmaf_rn, __fmul_rn): left to
// nvcc, a multiply-add is contracted per instantiation, and the Mamba-1 step contracted
// differently in the tiled kernel and the one-token one (1 ulp apart, seen on an H200).
//
// A warp runs kRows rows that read the same B and C (the rows of one SSD head; any Mamba-1
// channels), so B and C are loaded once for them all. With one row per warp, every row loaded
// its own copy: 2·N floats per token and row from L2, which bounded the prefill scans (the SSD
// scan of an 80-head layer read 10 GB for a 2,048-token prefill). Each row's arithmetic is the
// same whatever kRows is, so every kRows gives the same bits.

constexpr int kMaxStatesPerLane = 8;  // N ≤ 256
constexpr unsigned kFullMask = 0xffffffffu;

// Copies the warp's row of state to `row`.
template <int kStates>
__device__ void StoreRow(const float (&h)[kStates], int32_t n_state, float* row) {
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int i = 0; i < kStates; ++i) {
    const int n = lane + kWarp * i;
    if (n < n_state) row[n] = h[i];
  }
}

// The warp's row of state from `row`, 0 beyond n_state.
template <int kStates>
__device__ void LoadRow(const float* row, int32_t n_state, float (&h)[kStates]) {
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int i = 0; i < kStates; ++i) {
    const int n = lane + kWarp * i;
    h[i] = n < n_state ? row[n] : 0.0f;
  }
}

// The lane's states of B (or C) for the tile's `count` tokens from t0: m[k][i] =
// src[(t0 + k)·ld + lane + 32·i], 0 beyond the tile or n_state.
template <int kStates, int kTokens>
__device__ void LoadTile(const float* src, int64_t ld, int64_t t0, int count, int32_t n_state,
                         float (&m)[kTokens][kStates]) {
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int k = 0; k < kTokens; ++k) {
#pragma unroll
    for (int i = 0; i < kStates; ++i) {
      const int n = lane + kWarp * i;
      m[k][i] = k < count && n < n_state ? src[(t0 + k) * ld + n] : 0.0f;
    }
  }
}

// A token's total over the warp, as TileSums hands it to a lane.
struct TileSum {
  float total;
  int token;    // which of the tile's tokens (k)
  bool stores;  // one lane per token: the one that writes it
};

// The tile's partial sums acc[k] each added over the warp, with WarpSum's additions: at each
// step a lane adds its partner's (lane ^ offset) partial sum to its own, for every token alike,
// so a token's total has the bits WarpSum gives it (a one-token call's). Where WarpSum keeps one
// value throughout, the first steps here halve the values a lane holds (its bit of the offset
// says which half it keeps and which it hands over): 9 shuffles for 8 tokens, where 8 WarpSums
// take 40, which bounded the scans' throughput.
template <int kTokens>
__device__ TileSum TileSums(const float (&acc)[kTokens]) {
  static_assert(kTokens >= 1 && kTokens <= kWarp && (kTokens & (kTokens - 1)) == 0,
                "the halving needs a power of two of tokens, at most a warp's lanes");
  const int lane = threadIdx.x % kWarp;
  float v[kTokens];
#pragma unroll
  for (int k = 0; k < kTokens; ++k) v[k] = acc[k];
  int token = 0;
  int offset = kWarp / 2;
#pragma unroll
  for (int n = kTokens; n > 1; n /= 2, offset /= 2) {
    const int half = n / 2;
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float keep = upper ? v[i + half] : v[i];
      const float give = upper ? v[i] : v[i + half];
      v[i] = keep + __shfl_xor_sync(kFullMask, give, offset);
    }
    if (upper) token += half;
  }
  for (; offset > 0; offset /= 2) v[0] += __shfl_xor_sync(kFullMask, v[0], offset);
  return {v[0], token, lane % (kWarp / kTokens) == 0};
}

template <int kStates, int kTokens, int kRows>
__global__ void SelectiveScanKernel(SelectiveScanArgs a, Snapshots snaps) {
  const int64_t first = (int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp) * kRows;
  if (first >= a.inner) return;
  const Rows rows = RowsOf(a);
  const int lane = threadIdx.x % kWarp;
  const int32_t N = a.state_size;
  // Rows past the last channel run on zeros and store nothing, so that the warp's shuffles
  // still have every lane.
  bool live[kRows];
  float A[kRows][kStates], D[kRows], delta_bias[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    live[r] = first + r < a.inner;
    const int64_t d = live[r] ? first + r : first;
    LoadRow<kStates>(a.a + d * N, N, A[r]);
    D[r] = a.d[d];
    delta_bias[r] = a.delta_bias[d];
  }
  float h[kRows][kStates];
  SnapshotCursor next;
  auto emit = [&](int64_t done) {
    while (next.after == done) {
      float* dst = SnapshotDst(rows, snaps, next.index);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (live[r]) StoreRow<kStates>(h[r], N, dst + (first + r) * N);
      }
      next = CursorAt(rows, snaps, next.index + 1);
    }
  };
  const int64_t end = rows.first + rows.tokens;
  int64_t t0 = rows.first;
  do {
    const int count = static_cast<int>(min(int64_t{kTokens}, end - t0));
    float lane_dt[kRows], lane_u[kRows], lane_z[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      lane_dt[r] = lane_u[r] = lane_z[r] = 0.0f;
      if (lane < count && live[r]) {
        const int64_t t = t0 + lane, d = first + r;
        lane_u[r] = a.u[t * a.ld_u + d];
        lane_dt[r] = Softplus(a.delta[t * a.ld_delta + d] + delta_bias[r]);
        if (a.z != nullptr) lane_z[r] = a.z[t * a.ld_z + d];
      }
    }
    float b[kTokens][kStates], c[kTokens][kStates];
    LoadTile<kStates, kTokens>(a.b, a.ld_b, t0, count, N, b);
    LoadTile<kStates, kTokens>(a.c, a.ld_c, t0, count, N, c);
    if (t0 == rows.first) {  // after the first tile's loads, so that they overlap the state's
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (live[r]) {
          LoadRow<kStates>(rows.state + (first + r) * N, N, h[r]);
        } else {
#pragma unroll
          for (int i = 0; i < kStates; ++i) h[r][i] = 0.0f;
        }
      }
      next = CursorAt(rows, snaps, 0);
      emit(0);
    }
    float acc[kRows][kTokens];
#pragma unroll
    for (int k = 0; k < kTokens; ++k) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][k] = 0.0f;
      if (k < count) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float dt = __shfl_sync(kFullMask, lane_dt[r], k);
          const float u = __shfl_sync(kFullMask, lane_u[r], k);
#pragma unroll
          for (int i = 0; i < kStates; ++i) {
            if (lane + kWarp * i < N) {
              const float decay = expf(__fmul_rn(dt, A[r][i]));
              h[r][i] = __fmaf_rn(decay, h[r][i], __fmul_rn(__fmul_rn(dt, b[k][i]), u));
              acc[r][k] = __fmaf_rn(h[r][i], c[k][i], acc[r][k]);
            }
          }
        }
        emit(t0 + k - rows.first + 1);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const TileSum sum = TileSums(acc[r]);
      const float u = __shfl_sync(kFullMask, lane_u[r], sum.token);
      const float z = __shfl_sync(kFullMask, lane_z[r], sum.token);
      if (live[r] && sum.stores && sum.token < count) {
        float y = __fmaf_rn(D[r], u, sum.total);
        if (a.z != nullptr) y *= Silu(z);
        a.y[(t0 + sum.token) * a.ld_y + first + r] = y;
      }
    }
    t0 += kTokens;
  } while (t0 < end);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (live[r]) StoreRow<kStates>(h[r], N, rows.state + (first + r) * N);
  }
}

__device__ float SsdDt(float raw, float bias, float dt_min, float dt_max) {
  float dt = Softplus(raw + bias);
  if (dt < dt_min) dt = dt_min;
  if (dt_max > 0.0f && dt_max < INFINITY && dt > dt_max) dt = dt_max;
  return dt;
}

// kRows divides the head dimension P (the launch checks), so a warp's rows are one head's: they
// share its step size and decay as well as its group's B and C.
template <int kStates, int kTokens, int kRows>
__global__ void SsdScanKernel(SsdScanArgs a, Snapshots snaps) {
  // The warp's first row, h·P + p.
  const int64_t first = (int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp) * kRows;
  const int64_t H = a.heads, P = a.head_dim;
  if (first >= H * P) return;
  const Rows rows = RowsOf(a);
  const int lane = threadIdx.x % kWarp;
  const int64_t hd = first / P;
  const int64_t g = hd / (H / a.groups);
  const int32_t N = a.state_size;
  const float A = a.a[hd], D = a.d[hd], dt_bias = a.dt_bias[hd];
  float s[kRows][kStates];
  SnapshotCursor next;
  auto emit = [&](int64_t done) {
    while (next.after == done) {
      float* dst = SnapshotDst(rows, snaps, next.index);
#pragma unroll
      for (int r = 0; r < kRows; ++r) StoreRow<kStates>(s[r], N, dst + (first + r) * N);
      next = CursorAt(rows, snaps, next.index + 1);
    }
  };
  const int64_t end = rows.first + rows.tokens;
  int64_t t0 = rows.first;
  do {
    const int count = static_cast<int>(min(int64_t{kTokens}, end - t0));
    // dt·x is the recurrence's first product (dt · x · B associates as (dt · x) · B), so lane k
    // forms it once and hands it over with the decay: two broadcasts per token and row.
    float lane_decay = 0.0f, lane_dtx[kRows], lane_x[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) lane_dtx[r] = lane_x[r] = 0.0f;
    if (lane < count) {
      const int64_t t = t0 + lane;
      const float dt = SsdDt(a.dt[t * a.ld_dt + hd], dt_bias, a.dt_min, a.dt_max);
      lane_decay = expf(__fmul_rn(dt, A));
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        lane_x[r] = a.x[t * a.ld_x + first + r];
        lane_dtx[r] = __fmul_rn(dt, lane_x[r]);
      }
    }
    float b[kTokens][kStates], c[kTokens][kStates];
    LoadTile<kStates, kTokens>(a.b + g * N, a.ld_b, t0, count, N, b);
    LoadTile<kStates, kTokens>(a.c + g * N, a.ld_c, t0, count, N, c);
    if (t0 == rows.first) {  // after the first tile's loads, so that they overlap the state's
#pragma unroll
      for (int r = 0; r < kRows; ++r) LoadRow<kStates>(rows.state + (first + r) * N, N, s[r]);
      next = CursorAt(rows, snaps, 0);
      emit(0);
    }
    float acc[kRows][kTokens];
#pragma unroll
    for (int k = 0; k < kTokens; ++k) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][k] = 0.0f;
      if (k < count) {
        const float decay = __shfl_sync(kFullMask, lane_decay, k);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float dtx = __shfl_sync(kFullMask, lane_dtx[r], k);
#pragma unroll
          for (int i = 0; i < kStates; ++i) {
            if (lane + kWarp * i < N) {
              s[r][i] = __fmaf_rn(decay, s[r][i], __fmul_rn(dtx, b[k][i]));
              acc[r][k] = __fmaf_rn(s[r][i], c[k][i], acc[r][k]);
            }
          }
        }
        emit(t0 + k - rows.first + 1);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const TileSum sum = TileSums(acc[r]);
      const float x = __shfl_sync(kFullMask, lane_x[r], sum.token);
      if (sum.stores && sum.token < count) {
        a.y[(t0 + sum.token) * a.ld_y + first + r] = __fmaf_rn(D, x, sum.total);
      }
    }
    t0 += kTokens;
  } while (t0 < end);
#pragma unroll
  for (int r = 0; r < kRows; ++r) StoreRow<kStates>(s[r], N, rows.state + (first + r) * N);
}

// The scan kernel for a state of n floats per row and kRows rows per warp: the fewest states per
// lane that hold it, with tiles of kTile tokens (half that at 8 states per lane, so that B and C
// stay in registers), or of one token where each row has one (decode): a tile costs registers,
// and a decode step, bound by the state's bandwidth, wants the occupancy instead. A token's
// arithmetic is the same in all.
template <typename Args>
using ScanKernel = void (*)(Args, Snapshots);
template <typename Args, template <int, int, int> class Pick, int kTokens, int kRows>
ScanKernel<Args> KernelWithTile(int32_t n) {
  if (n <= kWarp) return Pick<1, kTokens, kRows>::kernel;
  if (n <= 2 * kWarp) return Pick<2, kTokens, kRows>::kernel;
  if (n <= 4 * kWarp) return Pick<4, kTokens, kRows>::kernel;
  return Pick<kMaxStatesPerLane, (kTokens + 1) / 2, kRows>::kernel;
}
bool OneTokenPerRow(const auto& a) {
  return a.state_table != nullptr ? a.sequences.count == 0 : a.tokens <= 1;
}
// A prefill's kernel with `rows_per_warp` rows per warp (1, 2 or 4), or a decode step's (one
// row per warp: the state's bandwidth bounds it, not B's and C's).
template <typename Args, template <int, int, int> class Pick>
ScanKernel<Args> KernelFor(const Args& a, int rows_per_warp) {
  if (OneTokenPerRow(a)) return KernelWithTile<Args, Pick, 1, 1>(a.state_size);
  switch (rows_per_warp) {
    case 1:
      return KernelWithTile<Args, Pick, kTile, 1>(a.state_size);
    case 2:
      return KernelWithTile<Args, Pick, kTile, 2>(a.state_size);
    default:
      return KernelWithTile<Args, Pick, kTile, 4>(a.state_size);
  }
}
template <int kStates, int kTokens, int kRows>
struct SelectiveScanPick {
  static constexpr ScanKernel<SelectiveScanArgs> kernel =
      SelectiveScanKernel<kStates, kTokens, kRows>;
};
template <int kStates, int kTokens, int kRows>
struct SsdScanPick {
  static constexpr ScanKernel<SsdScanArgs> kernel = SsdScanKernel<kStates, kTokens, kRows>;
};

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

// The rows per warp of a prefill, unless the caller names it: 4 (2 at 8 states per lane, whose B
// and C tiles already take 64 registers). A decode step takes 1 (KernelFor).
int DefaultRowsPerWarp(int32_t state_size) { return state_size <= 4 * kWarp ? 4 : 2; }

bool ValidRowsPerWarp(int rows_per_warp) {
  return rows_per_warp == 1 || rows_per_warp == 2 || rows_per_warp == 4;
}

// The rows per warp a call runs: a named count checked (1, 2 or 4, and a divisor of
// `must_divide`), or the default; one for a decode step whatever was named. 0 when the named
// count is refused.
template <typename Args>
int RowsPerWarpFor(const Args& a, int named, int64_t must_divide) {
  if (named != 0 && (!ValidRowsPerWarp(named) || must_divide % named != 0)) return 0;
  int rows = named;
  if (rows == 0) {
    rows = DefaultRowsPerWarp(a.state_size);
    while (must_divide % rows != 0) rows /= 2;
  }
  return OneTokenPerRow(a) ? 1 : rows;
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
  const ConvKernelFn kernel =
      ConvKernelOfWidth(a.kernel, std::make_integer_sequence<int, kMaxConvKernel>());
  kernel<<<grid, kThreads, 0, stream>>>(a, snaps);
  return cudaGetLastError();
}

cudaError_t SelectiveScan(cudaStream_t stream, const SelectiveScanArgs& args) {
  return SelectiveScanWithRowsPerWarp(stream, args, 0);
}

cudaError_t SsdScan(cudaStream_t stream, const SsdScanArgs& args) {
  return SsdScanWithRowsPerWarp(stream, args, 0);
}

cudaError_t SelectiveScanWithRowsPerWarp(cudaStream_t stream, const SelectiveScanArgs& a,
                                         int rows_per_warp) {
  if (a.inner <= 0) return cudaSuccess;
  // Channels all share B and C: any count of them may share a warp (a partial last warp's
  // missing rows are skipped).
  rows_per_warp = RowsPerWarpFor(a, rows_per_warp, /*must_divide=*/4);  // 1, 2 and 4 divide 4
  Snapshots snaps;
  dim3 grid;
  std::span<const StateSnapshot> snapshots;
  if (a.state_size < 1 || a.state_size > kWarp * kMaxStatesPerLane || rows_per_warp == 0 ||
      !Grid(a, Blocks(Blocks(a.inner, rows_per_warp), kWarpsPerBlock), &grid, &snapshots) ||
      !ToSnapshots(snapshots, a.tokens, false, &snaps)) {
    return cudaErrorInvalidValue;
  }
  const ScanKernel<SelectiveScanArgs> kernel =
      KernelFor<SelectiveScanArgs, SelectiveScanPick>(a, rows_per_warp);
  kernel<<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(a, snaps);
  return cudaGetLastError();
}

cudaError_t SsdScanWithRowsPerWarp(cudaStream_t stream, const SsdScanArgs& a, int rows_per_warp) {
  const int64_t rows = int64_t{a.heads} * a.head_dim;
  if (rows <= 0) return cudaSuccess;
  // A warp's rows are one head's: the count must divide the head dimension.
  rows_per_warp = RowsPerWarpFor(a, rows_per_warp, a.head_dim);
  Snapshots snaps;
  dim3 grid;
  std::span<const StateSnapshot> snapshots;
  if (a.state_size < 1 || a.state_size > kWarp * kMaxStatesPerLane || a.groups < 1 ||
      a.heads % a.groups != 0 || rows_per_warp == 0 ||
      !Grid(a, Blocks(rows / rows_per_warp, kWarpsPerBlock), &grid, &snapshots) ||
      !ToSnapshots(snapshots, a.tokens, false, &snaps)) {
    return cudaErrorInvalidValue;
  }
  const ScanKernel<SsdScanArgs> kernel = KernelFor<SsdScanArgs, SsdScanPick>(a, rows_per_warp);
  kernel<<<grid, kWarpsPerBlock * kWarp, 0, stream>>>(a, snaps);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda
