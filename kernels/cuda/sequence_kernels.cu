#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

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

}  // namespace tandem::kernels::cuda
