#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/key_splits.cuh"
#include "kernels/cuda/key_splits.h"
#include "kernels/cuda/paged_kv.cuh"
#include "kernels/cuda/row_attention.h"
#include "kernels/cuda/warp_math.cuh"

namespace tandem::kernels::cuda {
namespace {

struct KeyRange {
  float* const* pages;
  int64_t begin;
  int64_t end;
};

__device__ KeyRange RangeOf(const RowKeys& k, int64_t t) {
  if (k.page_tables == nullptr) {
    const int64_t end = k.causal ? min(k.key_end, k.start_pos + t + 1) : k.key_end;
    return {k.pages, k.key_begin, end};
  }
  if (k.positions != nullptr) return {k.page_tables[t], 0, k.positions[t] + 1};
  return {k.page_tables[t], k.begins[t], k.ends[t]};
}

// Split `split` of `splits` of the range.
__device__ KeyRange SplitOf(KeyRange r, int split, int splits) {
  const KeySpan span = SplitSpan(r.begin, r.end, split, splits);
  return {r.pages, span.begin, span.end};
}

// ---- a warp per (row, query head): any head_dim up to kMaxHeadDim ------------------------

constexpr int kWarpsPerBlock = 4;

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

__global__ void WarpRowsKernel(RowAttention a, SplitDest d, int splits) {
  const int64_t item = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  if (item >= a.rows * a.heads) return;
  const int64_t t = item / a.heads;
  const int32_t head = static_cast<int32_t>(item % a.heads);
  const int32_t kv_head = head / (a.heads / a.kv.num_kv_heads);
  const int32_t dh = a.kv.head_dim;
  const KeyRange r = SplitOf(RangeOf(a.keys, t), blockIdx.y, splits);
  PagedKv kv = a.kv;
  kv.pages = r.pages;
  AttendRow(a.q + t * a.ld_q + int64_t{head} * dh, kv, kv_head, r.begin, r.end, a.scale,
            d.Out(blockIdx.y, t, head, dh), d.Lse(blockIdx.y, t, head));
}

// ---- a block per (row, KV head): the group's query heads share each staged key ------------
//
// The block stages kGroupKeys keys and values at a time in shared memory (16-byte loads), then
// a warp per query head scores them (lane j takes key j, the dot product over head_dim from
// shared memory) and updates the head's online softmax, and every thread accumulates its
// outputs (a query head's element) over the tile. Memory-bound like decode attention is: a
// (row, KV head)'s keys are read once, where a warp per query head reads them group times.
constexpr int kGroupThreads = 128;
constexpr int kGroupKeys = 32;  // a warp's lanes
constexpr int kGroupMaxHeadDim = 128;
constexpr int kGroupMaxOutputs = 2048;  // query heads per KV head × head_dim
constexpr int kGroupMaxHeads = 16;
constexpr int kGroupOutputsPerThread = kGroupMaxOutputs / kGroupThreads;
// A key row's stride: +4 floats puts consecutive keys' 16-byte loads in different banks.
constexpr int kKeyStride = kGroupMaxHeadDim + 4;

__global__ void __launch_bounds__(kGroupThreads)
    GroupRowsKernel(RowAttention a, SplitDest d, int splits) {
  __shared__ __align__(16) float qs[kGroupMaxOutputs];
  __shared__ __align__(16) float ks[kGroupKeys][kKeyStride];
  __shared__ __align__(16) float vs[kGroupKeys][kGroupMaxHeadDim];
  __shared__ float ps[kGroupMaxHeads][kGroupKeys];
  __shared__ float head_max[kGroupMaxHeads], head_sum[kGroupMaxHeads], head_rescale[kGroupMaxHeads];
  const int32_t kv_heads = a.kv.num_kv_heads, group = a.heads / kv_heads, dh = a.kv.head_dim;
  const int64_t t = blockIdx.x / kv_heads;
  const int32_t kv_head = static_cast<int32_t>(blockIdx.x % kv_heads);
  const int outputs = group * dh, vec = dh / 4;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const KeyRange r = SplitOf(RangeOf(a.keys, t), blockIdx.y, splits);
  PagedKv kv = a.kv;
  kv.pages = r.pages;
  // The group's query heads are adjacent: heads kv_head·group .. kv_head·group + group − 1.
  const float* q = a.q + t * a.ld_q + int64_t{kv_head} * group * dh;
  for (int i = threadIdx.x; i < outputs; i += kGroupThreads) qs[i] = q[i];
  if (threadIdx.x < group) {
    head_max[threadIdx.x] = -INFINITY;
    head_sum[threadIdx.x] = 0.0f;
  }
  float acc[kGroupOutputsPerThread];
#pragma unroll
  for (int i = 0; i < kGroupOutputsPerThread; ++i) acc[i] = 0.0f;

  for (int64_t k0 = r.begin; k0 < r.end; k0 += kGroupKeys) {
    __syncthreads();  // the previous tile is consumed (and, the first time, qs is written)
    for (int i = threadIdx.x; i < kGroupKeys * vec; i += kGroupThreads) {
      const int j = i / vec, e = (i % vec) * 4;
      const int64_t pos = k0 + j;
      float4 key = make_float4(0.0f, 0.0f, 0.0f, 0.0f), value = key;
      if (pos < r.end) {
        key = *reinterpret_cast<const float4*>(KeyAt(kv, pos, kv_head) + e);
        value = *reinterpret_cast<const float4*>(ValueAt(kv, pos, kv_head) + e);
      }
      *reinterpret_cast<float4*>(&ks[j][e]) = key;
      *reinterpret_cast<float4*>(&vs[j][e]) = value;
    }
    __syncthreads();
    for (int g = warp; g < group; g += kGroupThreads / kWarp) {
      const float4* qv = reinterpret_cast<const float4*>(qs + g * dh);
      const float4* kr = reinterpret_cast<const float4*>(&ks[lane][0]);
      float dot = 0.0f;
      for (int e = 0; e < vec; ++e) {
        const float4 x = qv[e], y = kr[e];
        dot += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
      }
      const float score = k0 + lane < r.end ? dot * a.scale : -INFINITY;
      const float old_max = head_max[g];
      const float new_max = fmaxf(old_max, WarpMax(score));
      const float p = new_max == -INFINITY ? 0.0f : expf(score - new_max);
      const float tile_sum = WarpSum(p);
      ps[g][lane] = p;
      __syncwarp();
      if (lane == 0) {
        const float rescale = new_max == -INFINITY ? 1.0f : expf(old_max - new_max);
        head_sum[g] = head_sum[g] * rescale + tile_sum;
        head_max[g] = new_max;
        head_rescale[g] = rescale;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kGroupOutputsPerThread; ++i) {
      const int o = threadIdx.x + kGroupThreads * i;
      if (o < outputs) {
        const int g = o / dh, e = o % dh;
        float s = acc[i] * head_rescale[g];
#pragma unroll 8
        for (int j = 0; j < kGroupKeys; ++j) s += ps[g][j] * vs[j][e];
        acc[i] = s;
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kGroupOutputsPerThread; ++i) {
    const int o = threadIdx.x + kGroupThreads * i;
    if (o < outputs) {
      const int g = o / dh, e = o % dh;
      const float sum = head_sum[g];
      d.Out(blockIdx.y, t, kv_head * group + g, dh)[e] = sum > 0.0f ? acc[i] / sum : 0.0f;
    }
  }
  if (threadIdx.x < group) {
    const float sum = head_sum[threadIdx.x];
    float* lse = d.Lse(blockIdx.y, t, kv_head * group + threadIdx.x);
    if (lse != nullptr) *lse = sum > 0.0f ? head_max[threadIdx.x] + logf(sum) : -INFINITY;
  }
}

// The grouped kernel's limits; its 16-byte loads need whole float4s at 16-byte addresses (page
// pointers are allocation-aligned; the offsets inside a page are multiples of 4 floats then).
bool GroupKernelTakes(const RowAttention& a) {
  const int32_t dh = a.kv.head_dim, group = a.heads / a.kv.num_kv_heads;
  return dh % 4 == 0 && dh <= kGroupMaxHeadDim && group <= kGroupMaxHeads &&
         group * dh <= kGroupMaxOutputs && a.kv.layer_offset % 4 == 0;
}

}  // namespace

int RowAttentionSplits(int64_t rows, int32_t kv_heads, int multiprocessors) {
  const int64_t blocks = rows * std::max(kv_heads, 1);
  if (blocks <= 0) return 1;
  const int64_t wanted = (int64_t{multiprocessors} * 4 + blocks - 1) / blocks;
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, kMaxKeySplits));
}

cudaError_t LaunchRowAttention(cudaStream_t stream, const RowAttention& a,
                               const KeySplits& splits) {
  const int64_t items = a.rows * a.heads;
  if (items <= 0) return cudaSuccess;
  const int32_t dh = a.kv.head_dim;
  if (dh < 1 || dh > kMaxHeadDim || a.kv.num_kv_heads <= 0 || a.heads % a.kv.num_kv_heads != 0 ||
      a.kv.page_tokens <= 0 || splits.count < 1 || splits.count > kMaxKeySplits ||
      (splits.count > 1 && (splits.out == nullptr || splits.lse == nullptr)) ||
      a.rows * a.kv.num_kv_heads > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  const SplitDest d = SplitDest::For(splits, a.rows, a.heads, dh, a.out, a.ld_out, a.lse, a.ld_lse);
  const unsigned count = static_cast<unsigned>(splits.count);
  if (GroupKernelTakes(a)) {
    GroupRowsKernel<<<dim3(static_cast<unsigned>(a.rows * a.kv.num_kv_heads), count), kGroupThreads,
                      0, stream>>>(a, d, splits.count);
  } else {
    WarpRowsKernel<<<dim3(Blocks(items, kWarpsPerBlock), count), kWarpsPerBlock * kWarp, 0,
                     stream>>>(a, d, splits.count);
  }
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  return MergeKeySplits(stream, splits, a.rows, a.heads, dh, a.out, a.ld_out, a.lse, a.ld_lse);
}

}  // namespace tandem::kernels::cuda
