#include <cuda_runtime.h>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/cuda/shared_memory_limit.h"
#include "kernels/threshold_draw.h"

namespace tandem::kernels::cuda {
namespace {

// A whole row per block of kThreads threads. kSampleThreads, where the device's shared memory
// takes its buckets (~152 KB: Hopper, A100), else kSmallSampleThreads (~38 KB: A10, L4, RTX
// parts). A 256K vocabulary is then 256 or 1,024 weights per thread per reduction. 1,024 threads
// ran 2.8x faster than 256 on an H200 (64 rows of 128K: 0.80 against 2.29 ms): each thread's
// bucket updates are a chain through shared memory, and 8 warps left the multiprocessor waiting
// on them.
constexpr int kSampleThreads = 1024;
constexpr int kSmallSampleThreads = 256;

// Calls body(value, id) for this thread's elements of the row, ids kThreads apart in
// increasing order (the order every per-thread sum here depends on). Loads kRowUnroll values
// before using any: a loop that loads one value and then writes shared memory cannot hoist the
// next load (the compiler cannot rule out aliasing), and waited out an L2 round trip per
// element.
constexpr int kRowUnroll = 8;

template <int kThreads, class Body>
__device__ __forceinline__ void ForEachOfRow(const float* row, int64_t cols, Body body) {
  for (int64_t base = threadIdx.x; base < cols; base += int64_t{kThreads} * kRowUnroll) {
    float values[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const int64_t i = base + int64_t{u} * kThreads;
      values[u] = i < cols ? row[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const int64_t i = base + int64_t{u} * kThreads;
      if (i < cols) body(values[u], i);
    }
  }
}

// Per-thread bucket sums for BlockRow::BucketSums, a row of 17 doubles per thread (the pad keeps
// a warp's updates off a single bank), each warp's, and the block's totals.
template <int kThreads>
struct BucketScratch {
  static constexpr int kWarps = kThreads / 32;
  double per_thread[kThreads][kSearchWays + 1];
  double per_warp[kWarps][kSearchWays];
  double totals[kSearchWays];
};

// The kernel's shared memory, over the 48 KB a launch gets without asking (~156 KB).
template <int kThreads>
struct SampleShared {
  BlockScratch<kThreads> reduce;
  BucketScratch<kThreads> buckets;
};

// DrawByThresholds' reductions over one row of weights, block-wide.
template <int kThreads>
class BlockRow {
 public:
  __device__ BlockRow(const float* weights, int64_t cols, BlockScratch<kThreads>& scratch,
                      BucketScratch<kThreads>& buckets)
      : w_(weights), cols_(cols), scratch_(scratch), buckets_(buckets) {}
  __device__ int64_t cols() const { return cols_; }

  template <class Keep>
  __device__ double Sum(Keep keep, bool count) {
    double total = 0;
    ForEachOfRow<kThreads>(w_, cols_, [&](float w, int64_t i) {
      if (keep(__float_as_uint(w), static_cast<int32_t>(i))) total += count ? 1.0 : w;
    });
    return BlockSum(total, scratch_);
  }

  // Each thread sums its own tokens per bucket, then a thread per bucket adds the threads' sums
  // in thread order: a fixed order, no atomics.
  template <class Keep, class Bucket>
  __device__ const double* BucketSums(Keep keep, bool count, Bucket bucket) {
    double* mine = buckets_.per_thread[threadIdx.x];
    for (int b = 0; b < kSearchWays; ++b) mine[b] = 0;
    ForEachOfRow<kThreads>(w_, cols_, [&](float w, int64_t i) {
      const uint32_t key = __float_as_uint(w);
      if (keep(key, static_cast<int32_t>(i))) {
        mine[bucket(key, static_cast<int32_t>(i))] += count ? 1.0 : w;
      }
    });
    // Also orders this call's writes after every thread's reads of the previous totals. Then a
    // thread per (warp, bucket) adds the warp's 32 threads, and a thread per bucket the warps.
    __syncthreads();
    if (threadIdx.x < BucketScratch<kThreads>::kWarps * kSearchWays) {
      const int warp = threadIdx.x / kSearchWays, b = threadIdx.x % kSearchWays;
      double total = 0;
      for (int t = warp * 32; t < warp * 32 + 32; ++t) total += buckets_.per_thread[t][b];
      buckets_.per_warp[warp][b] = total;
    }
    __syncthreads();
    if (threadIdx.x < kSearchWays) {
      double total = 0;
      for (int w = 0; w < BucketScratch<kThreads>::kWarps; ++w) {
        total += buckets_.per_warp[w][threadIdx.x];
      }
      buckets_.totals[threadIdx.x] = total;
    }
    __syncthreads();
    return buckets_.totals;
  }

  template <class Keep>
  __device__ int32_t MaxId(Keep keep) {
    int64_t best = -1;
    ForEachOfRow<kThreads>(w_, cols_, [&](float w, int64_t i) {
      if (keep(__float_as_uint(w), static_cast<int32_t>(i))) best = i;
    });
    return static_cast<int32_t>(BlockMax(best, scratch_));
  }

 private:
  const float* w_;
  int64_t cols_;
  BlockScratch<kThreads>& scratch_;
  BucketScratch<kThreads>& buckets_;
};

// The best token ranked below (value, id) in the order logprobs list them (larger value first,
// lower id first among equals), NaN passed over; -1 when none is left.
template <int kThreads>
__device__ int64_t BestBelow(const float* row, int64_t cols, float value, int64_t id,
                             BlockScratch<kThreads>& s) {
  float best = 0.0f;
  int64_t best_id = -1;
  ForEachOfRow<kThreads>(row, cols, [&](float v, int64_t i) {
    const bool below = id < 0 || v < value || (v == value && i > id);
    if (v == v && below && (best_id < 0 || v > best)) {
      best = v;
      best_id = i;
    }
  });
  return BlockBest(best, best_id, s);
}

// kernels::ComputeLogprobs' log-normaliser: max + log Σ exp(l − max), in double.
template <int kThreads>
__device__ double LogNormaliser(const float* row, int64_t cols, BlockScratch<kThreads>& s) {
  const int32_t argmax = BlockArgmax(row, cols, s);
  const double max_logit = row[argmax];
  double total = 0;
  ForEachOfRow<kThreads>(
      row, cols, [&](float v, int64_t) { total += exp(static_cast<double>(v) - max_logit); });
  return max_logit + log(BlockSum(total, s));
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* logits, int64_t ld, int64_t cols, const SamplingRow* rules,
                     const PenaltyToken* seen, int64_t seen_count, float* scratch,
                     SampledToken* out) {
  extern __shared__ double shared_words[];
  SampleShared<kThreads>& shared = *reinterpret_cast<SampleShared<kThreads>*>(shared_words);
  BlockScratch<kThreads>& s = shared.reduce;
  BucketScratch<kThreads>& buckets = shared.buckets;
  const SamplingRow rule = rules[blockIdx.x];
  const float* raw = logits + int64_t{blockIdx.x} * ld;
  float* row = scratch + int64_t{blockIdx.x} * cols;
  SampledToken* result = out + blockIdx.x;

  // Logprobs describe the model: they come from the raw row.
  const bool logprobs = rule.logprobs || rule.top_logprobs > 0;
  double log_z = 0;
  if (logprobs) {
    log_z = LogNormaliser(raw, cols, s);
    const int32_t n = min(max(rule.top_logprobs, 0), SampledToken::kMaxTop);
    float value = 0.0f;
    int64_t id = -1;
    for (int32_t k = 0; k < n; ++k) {
      id = BestBelow(raw, cols, value, id, s);
      if (id < 0) break;
      value = raw[id];
      if (threadIdx.x == 0) {
        result->top[k] = {static_cast<int32_t>(id), static_cast<float>(value - log_z)};
      }
    }
  }

  // The penalised copy. The row's penalty tokens are distinct, so each thread rewrites its own.
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) row[i] = raw[i];
  __syncthreads();
  const bool seen_valid = rule.penalties_begin >= 0 && rule.penalties_end >= rule.penalties_begin &&
                          rule.penalties_end <= seen_count;
  if (rule.penalties.active() && seen_valid) {
    for (int64_t j = rule.penalties_begin + threadIdx.x; j < rule.penalties_end; j += kThreads) {
      const PenaltyToken t = seen[j];
      if (t.token >= 0 && t.token < cols) {
        row[t.token] = PenalisedLogit(row[t.token], rule.penalties, t.generated);
      }
    }
  }
  __syncthreads();

  // Greedy rows, and rows with a NaN or no finite maximum, give their argmax.
  int32_t token = BlockArgmax(row, cols, s);
  int any_nan = 0;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) any_nan |= row[i] != row[i];
  any_nan = __syncthreads_or(any_nan);
  const float max_logit = row[token];
  if (!rule.greedy && !any_nan && isfinite(max_logit)) {
    __syncthreads();  // every thread has read row[token] before it is overwritten
    const double inv_t = 1.0 / static_cast<double>(rule.temperature);
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
      // kernels::CandidateWeight, with the device's expf.
      row[i] = expf(static_cast<float>((static_cast<double>(row[i]) - max_logit) * inv_t));
    }
    __syncthreads();
    BlockRow<kThreads> weights(row, cols, s, buckets);
    token = DrawByThresholds(weights, rule);
  }
  if (threadIdx.x == 0) {
    result->token = token;
    if (logprobs) result->logprob = static_cast<float>(raw[token] - log_z);
  }
}

template <int kThreads>
cudaError_t Launch(cudaStream_t stream, const float* logits, int64_t ld, int64_t rows, int64_t cols,
                   const SamplingRow* rules, const PenaltyToken* seen, int64_t seen_count,
                   float* scratch, SampledToken* out) {
  constexpr size_t bytes = sizeof(SampleShared<kThreads>);
  // Over the 48 KB a launch gets without asking, for the larger block.
  const cudaError_t set = cudaFuncSetAttribute(SampleRowsKernel<kThreads>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (set != cudaSuccess) return set;
  SampleRowsKernel<kThreads><<<static_cast<unsigned>(rows), kThreads, bytes, stream>>>(
      logits, ld, cols, rules, seen, seen_count, scratch, out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t SampleRows(cudaStream_t stream, const float* logits, int64_t ld, int64_t rows,
                       int64_t cols, const SamplingRow* rules, const PenaltyToken* seen,
                       int64_t seen_count, float* scratch, SampledToken* out) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0 || cols > INT32_MAX || rows > INT32_MAX || ld < cols) {
    return cudaErrorInvalidValue;
  }
  return sizeof(SampleShared<kSampleThreads>) <= BlockSharedMemoryLimit()
             ? Launch<kSampleThreads>(stream, logits, ld, rows, cols, rules, seen, seen_count,
                                      scratch, out)
             : Launch<kSmallSampleThreads>(stream, logits, ld, rows, cols, rules, seen, seen_count,
                                           scratch, out);
}

}  // namespace tandem::kernels::cuda
