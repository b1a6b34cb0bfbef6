#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cluster_reduce.cuh"
#include "kernels/cuda/handled_error.h"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/cuda/shared_memory_limit.h"
#include "kernels/threshold_draw.h"

namespace tandem::kernels::cuda {
namespace {

// A row per block of kThreads threads, or per cluster of such blocks (RowThreads). kSampleThreads,
// where the device's shared memory takes its buckets (~152 KB: Hopper, A100), else
// kSmallSampleThreads (~38 KB: A10, L4, RTX parts). A 256K vocabulary is then 256 or 1,024 weights
// per thread per reduction. 1,024 threads ran 2.8x faster than 256 on an H200 (64 rows of 128K:
// 0.80 against 2.29 ms): each thread's bucket updates are a chain through shared memory, and 8
// warps left the multiprocessor waiting on them.
constexpr int kSampleThreads = 1024;
constexpr int kSmallSampleThreads = 256;
// The most blocks a row's cluster may have: 8 is the size every sm_90 GPU can place.
constexpr int kMaxBlocksPerRow = 8;
// Values each thread loads before using any (RowThreads::ForEach).
constexpr int kRowUnroll = 8;

// Per-thread bucket sums for WeightRow::BucketSums, a row of 17 per thread (the pad keeps a
// warp's updates off a single bank), each warp's, and the block's totals.
template <int kThreads>
struct BucketScratch {
  static constexpr int kWarps = kThreads / 32;
  uint64_t per_thread[kThreads][kSearchWays + 1];
  uint64_t per_warp[kWarps][kSearchWays];
  uint64_t totals[kSearchWays];
};

// A block's results that the other blocks of its cluster read (RowThreads), and the combined
// ones.
struct ClusterSlots {
  uint64_t sum, sum_total;
  int64_t max, max_total;
  Candidate best, best_total;
  int any, any_total;
  uint64_t buckets[kSearchWays];
};

// The kernel's shared memory, over the 48 KB a launch gets without asking (~156 KB).
template <int kThreads>
struct SampleShared {
  BlockScratch<kThreads> reduce;
  BucketScratch<kThreads> buckets;
  ClusterSlots cluster;
};

// The threads that share a row: one block (kCluster false), or a cluster of blocks on GPUs that
// have them (sm_90), each block taking part of the row. Block `rank` of `ranks` takes the
// elements rank·kThreads + t + j·ranks·kThreads, its thread t those of its own t; every reduction
// spans all of the row's threads. The reductions are integer sums and maxima, so a row gives the
// same bits whatever number of blocks shares it.
template <int kThreads, bool kCluster>
class RowThreads {
 public:
  __device__ explicit RowThreads(SampleShared<kThreads>& shared)
      : s_(shared), rank_(kCluster ? ClusterRank() : 0), ranks_(kCluster ? ClusterBlocks() : 1) {}
  __device__ unsigned rank() const { return rank_; }
  // Which row of the launch is this block's.
  __device__ int64_t row() const { return blockIdx.x / ranks_; }
  __device__ bool Owns(int64_t i) const { return (i / kThreads) % ranks_ == rank_; }

  // Calls body(value, id) for this thread's elements of the row, in increasing order (the order
  // every per-thread sum here depends on). Loads kRowUnroll values before using any: a loop that
  // loads one value and then writes shared memory cannot hoist the next load (the compiler
  // cannot rule out aliasing), and waited out an L2 round trip per element.
  template <class Body>
  __device__ void ForEach(const float* row, int64_t cols, Body body) const {
    const int64_t stride = int64_t{ranks_} * kThreads;
    for (int64_t base = int64_t{rank_} * kThreads + threadIdx.x; base < cols;
         base += stride * kRowUnroll) {
      float values[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t i = base + u * stride;
        values[u] = i < cols ? row[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t i = base + u * stride;
        if (i < cols) body(values[u], i);
      }
    }
  }
  // The same without the values, for writes.
  template <class Body>
  __device__ void ForEachId(int64_t cols, Body body) const {
    const int64_t stride = int64_t{ranks_} * kThreads;
    for (int64_t i = int64_t{rank_} * kThreads + threadIdx.x; i < cols; i += stride) body(i);
  }

  __device__ uint64_t Sum(uint64_t v) {
    const uint64_t block = BlockSum(v, s_.reduce);
    if constexpr (!kCluster) return block;
    return ClusterCombine(block, &s_.cluster.sum, &s_.cluster.sum_total,
                          [](uint64_t a, uint64_t b) { return a + b; });
  }
  __device__ int64_t Max(int64_t v) {
    const int64_t block = BlockMax(v, s_.reduce);
    if constexpr (!kCluster) return block;
    return ClusterCombine(block, &s_.cluster.max, &s_.cluster.max_total,
                          [](int64_t a, int64_t b) { return a > b ? a : b; });
  }
  __device__ Candidate Best(float value, int64_t id) {
    const Candidate block = BlockBestCandidate(value, id, s_.reduce);
    if constexpr (!kCluster) return block;
    return ClusterCombine(block, &s_.cluster.best, &s_.cluster.best_total, Better);
  }
  __device__ bool Any(bool v) {
    const int block = __syncthreads_or(v);
    if constexpr (!kCluster) return block != 0;
    return ClusterCombine(block, &s_.cluster.any, &s_.cluster.any_total,
                          [](int a, int b) { return a | b; }) != 0;
  }
  // The row's bucket sums from the block's (`block`, in shared memory, written before a
  // __syncthreads()).
  __device__ const uint64_t* Buckets(const uint64_t* block) {
    if constexpr (!kCluster) return block;
    ClusterCombineEach(block, s_.cluster.buckets, kSearchWays,
                       [](uint64_t a, uint64_t b) { return a + b; });
    return s_.cluster.buckets;
  }

  // kernels::ArgmaxRow's rule over the row: the largest value, the lowest id among equal ones,
  // NaN passed over; id 0 when the row's first value is NaN (or all are), with that value.
  __device__ Candidate Argmax(const float* row, int64_t cols) {
    float best = 0.0f;
    int64_t best_id = -1;
    ForEach(row, cols, [&](float v, int64_t i) {
      if (v == v && (best_id < 0 || v > best)) {
        best = v;
        best_id = i;
      }
    });
    const Candidate found = Best(best, best_id);
    const float first = row[0];
    return first != first || found.id < 0 ? Candidate{first, 0} : found;
  }

 private:
  SampleShared<kThreads>& s_;
  unsigned rank_;
  unsigned ranks_;
};

// DrawByThresholds' reductions over one row of weights, summed as fixed-point integers.
template <int kThreads, bool kCluster>
class WeightRow {
 public:
  __device__ WeightRow(const float* weights, int64_t cols, RowThreads<kThreads, kCluster>& threads,
                       BucketScratch<kThreads>& buckets)
      : w_(weights), cols_(cols), bits_(FixedWeightBits(cols)), t_(threads), buckets_(buckets) {}
  __device__ int64_t cols() const { return cols_; }

  template <class Keep>
  __device__ uint64_t Sum(Keep keep, bool count) {
    uint64_t total = 0;
    t_.ForEach(w_, cols_, [&](float w, int64_t i) {
      if (keep(__float_as_uint(w), static_cast<int32_t>(i)))
        total += count ? 1 : FixedWeight(w, bits_);
    });
    return t_.Sum(total);
  }

  // Each thread sums its own tokens per bucket, then a thread per (warp, bucket) adds the warp's
  // 32 threads, a thread per bucket the warps, and the row's blocks their totals.
  template <class Keep, class Bucket>
  __device__ const uint64_t* BucketSums(Keep keep, bool count, Bucket bucket) {
    uint64_t* mine = buckets_.per_thread[threadIdx.x];
    for (int b = 0; b < kSearchWays; ++b) mine[b] = 0;
    t_.ForEach(w_, cols_, [&](float w, int64_t i) {
      const uint32_t key = __float_as_uint(w);
      if (keep(key, static_cast<int32_t>(i))) {
        mine[bucket(key, static_cast<int32_t>(i))] += count ? 1 : FixedWeight(w, bits_);
      }
    });
    // Also orders this call's writes after every thread's reads of the previous totals.
    __syncthreads();
    if (threadIdx.x < BucketScratch<kThreads>::kWarps * kSearchWays) {
      const int warp = threadIdx.x / kSearchWays, b = threadIdx.x % kSearchWays;
      uint64_t total = 0;
      for (int t = warp * 32; t < warp * 32 + 32; ++t) total += buckets_.per_thread[t][b];
      buckets_.per_warp[warp][b] = total;
    }
    __syncthreads();
    if (threadIdx.x < kSearchWays) {
      uint64_t total = 0;
      for (int w = 0; w < BucketScratch<kThreads>::kWarps; ++w) {
        total += buckets_.per_warp[w][threadIdx.x];
      }
      buckets_.totals[threadIdx.x] = total;
    }
    __syncthreads();
    return t_.Buckets(buckets_.totals);
  }

  template <class Keep>
  __device__ int32_t MaxId(Keep keep) {
    int64_t best = -1;
    t_.ForEach(w_, cols_, [&](float w, int64_t i) {
      if (keep(__float_as_uint(w), static_cast<int32_t>(i))) best = i;
    });
    return static_cast<int32_t>(t_.Max(best));
  }

 private:
  const float* w_;
  int64_t cols_;
  int bits_;
  RowThreads<kThreads, kCluster>& t_;
  BucketScratch<kThreads>& buckets_;
};

// The best token ranked below (value, id) in the order logprobs list them (larger value first,
// lower id first among equals), NaN passed over; -1 when none is left.
template <int kThreads, bool kCluster>
__device__ int64_t BestBelow(const float* row, int64_t cols, float value, int64_t id,
                             RowThreads<kThreads, kCluster>& t) {
  float best = 0.0f;
  int64_t best_id = -1;
  t.ForEach(row, cols, [&](float v, int64_t i) {
    const bool below = id < 0 || v < value || (v == value && i > id);
    if (v == v && below && (best_id < 0 || v > best)) {
      best = v;
      best_id = i;
    }
  });
  return t.Best(best, best_id).id;
}

// kernels::ComputeLogprobs' log-normaliser, max + log Σ exp(l − max), with the exponentials
// (each in (0, 1]) summed in fixed point like the weights. A NaN anywhere makes it NaN, as it
// does the host's double sum (an integer has no NaN to carry it).
template <int kThreads, bool kCluster>
__device__ double LogNormaliser(const float* row, int64_t cols, RowThreads<kThreads, kCluster>& t) {
  const double max_logit = t.Argmax(row, cols).value;
  const int bits = FixedWeightBits(cols);
  uint64_t total = 0;
  bool nan = false;
  t.ForEach(row, cols, [&](float v, int64_t) {
    const double e = exp(static_cast<double>(v) - max_logit);
    nan |= e != e;
    total += __double2ull_ru(scalbn(e, bits));
  });
  const double sum = scalbn(static_cast<double>(t.Sum(total)), -bits);
  return t.Any(nan) ? static_cast<double>(NAN) : max_logit + log(sum);
}

template <int kThreads, bool kCluster>
__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* logits, int64_t ld, int64_t cols, const SamplingRow* rules,
                     const PenaltyToken* seen, int64_t seen_count, float* scratch,
                     SampledToken* out) {
  extern __shared__ double shared_words[];
  SampleShared<kThreads>& shared = *reinterpret_cast<SampleShared<kThreads>*>(shared_words);
  RowThreads<kThreads, kCluster> t(shared);
  const int64_t r = t.row();
  const SamplingRow rule = rules[r];
  const float* raw = logits + r * ld;
  float* row = scratch + r * cols;
  SampledToken* result = out + r;
  const bool writes_result = threadIdx.x == 0 && t.rank() == 0;

  // Logprobs describe the model: they come from the raw row.
  const bool logprobs = rule.logprobs || rule.top_logprobs > 0;
  double log_z = 0;
  if (logprobs) {
    log_z = LogNormaliser(raw, cols, t);
    const int32_t n = min(max(rule.top_logprobs, 0), SampledToken::kMaxTop);
    float value = 0.0f;
    int64_t id = -1;
    for (int32_t k = 0; k < n; ++k) {
      id = BestBelow(raw, cols, value, id, t);
      if (id < 0) break;
      value = raw[id];
      if (writes_result) {
        result->top[k] = {static_cast<int32_t>(id), static_cast<float>(value - log_z)};
      }
    }
  }

  // The penalised copy, each block its own elements. The row's penalty tokens are distinct, so
  // each thread rewrites its own.
  t.ForEachId(cols, [&](int64_t i) { row[i] = raw[i]; });
  __syncthreads();
  const bool seen_valid = rule.penalties_begin >= 0 && rule.penalties_end >= rule.penalties_begin &&
                          rule.penalties_end <= seen_count;
  if (rule.penalties.active() && seen_valid) {
    for (int64_t j = rule.penalties_begin + threadIdx.x; j < rule.penalties_end; j += kThreads) {
      const PenaltyToken p = seen[j];
      if (p.token >= 0 && p.token < cols && t.Owns(p.token)) {
        row[p.token] = PenalisedLogit(row[p.token], rule.penalties, p.generated);
      }
    }
  }
  __syncthreads();

  // Greedy rows, and rows with a NaN or no finite maximum, give their argmax.
  const Candidate best = t.Argmax(row, cols);
  int32_t token = static_cast<int32_t>(best.id);
  bool any_nan = false;
  t.ForEach(row, cols, [&](float v, int64_t) { any_nan |= v != v; });
  any_nan = t.Any(any_nan);
  const float max_logit = best.value;
  if (!rule.greedy && !any_nan && isfinite(max_logit)) {
    const double inv_t = 1.0 / static_cast<double>(rule.temperature);
    t.ForEachId(cols, [&](int64_t i) {
      // kernels::CandidateWeight, with the device's expf.
      row[i] = expf(static_cast<float>((static_cast<double>(row[i]) - max_logit) * inv_t));
    });
    __syncthreads();
    WeightRow<kThreads, kCluster> weights(row, cols, t, shared.buckets);
    token = DrawByThresholds(weights, rule);
  }
  if (writes_result) {
    result->token = token;
    if (logprobs) result->logprob = static_cast<float>(raw[token] - log_z);
  }
}

// What a launch of kThreads threads per block needs, set up once per device: the kernels'
// shared memory above the 48 KB a launch gets without asking, and the most blocks a row's
// cluster may have (1 where the device has no clusters, or cannot place them).
template <int kThreads>
int SetUpSampling(int device) {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};  // 0: not set up yet; else the most blocks
  if (device >= 0 && device < kDevices) {
    if (const int blocks = known[device].load(std::memory_order_relaxed); blocks > 0) {
      return blocks;
    }
  }
  constexpr size_t bytes = sizeof(SampleShared<kThreads>);
  if (AllowSharedMemory<SampleRowsKernel<kThreads, false>>(bytes) != cudaSuccess) return -1;
  int blocks = 1;
  int clusters = 0;
  // The cluster kernel must have been compiled for sm_90 or later (elsewhere it traps): a build
  // without a 9.x target, run on Hopper, has only PTX of an older architecture.
  cudaFuncAttributes built = {};
  if (Handled(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device)) == cudaSuccess &&
      clusters != 0 &&
      Handled(cudaFuncGetAttributes(&built, SampleRowsKernel<kThreads, true>)) == cudaSuccess &&
      built.binaryVersion >= 90 && built.ptxVersion >= 90 &&
      AllowSharedMemory<SampleRowsKernel<kThreads, true>>(bytes) == cudaSuccess) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(kMaxBlocksPerRow * 16);  // a multiple of any cluster size it may answer
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = bytes;
    int size = 0;
    if (Handled(cudaOccupancyMaxPotentialClusterSize(&size, SampleRowsKernel<kThreads, true>,
                                                     &config)) == cudaSuccess) {
      while (blocks * 2 <= size && blocks * 2 <= kMaxBlocksPerRow) blocks *= 2;
    }
  }
  if (device >= 0 && device < kDevices) known[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

template <int kThreads>
cudaError_t Launch(cudaStream_t stream, const float* logits, int64_t ld, int64_t rows, int64_t cols,
                   const SamplingRow* rules, const PenaltyToken* seen, int64_t seen_count,
                   float* scratch, SampledToken* out, int blocks_per_row) {
  int device = 0;
  if (Handled(cudaGetDevice(&device)) != cudaSuccess) return cudaErrorInvalidDevice;
  const int most = SetUpSampling<kThreads>(device);
  if (most < 0) return cudaErrorInvalidValue;
  int blocks = blocks_per_row;
  if (blocks <= 0) {
    // As many as leave no multiprocessor idle (a power of two up to the device's most): the
    // tokens are the same for any number.
    int multiprocessors = 1;
    Handled(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    blocks = 1;
    while (blocks * 2 <= most && rows * blocks * 2 <= multiprocessors) blocks *= 2;
  }
  if (blocks > most || rows * blocks > INT32_MAX) return cudaErrorInvalidValue;
  constexpr size_t bytes = sizeof(SampleShared<kThreads>);
  const auto one_block_per_row = [&] {
    SampleRowsKernel<kThreads, false><<<static_cast<unsigned>(rows), kThreads, bytes, stream>>>(
        logits, ld, cols, rules, seen, seen_count, scratch, out);
    return cudaGetLastError();
  };
  if (blocks == 1) return one_block_per_row();
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(rows * blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = bytes;
  config.stream = stream;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(blocks);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  const cudaError_t status = cudaLaunchKernelEx(&config, SampleRowsKernel<kThreads, true>, logits,
                                                ld, cols, rules, seen, seen_count, scratch, out);
  if (status == cudaSuccess || blocks_per_row > 0) return status;
  // Clusters the device would not place after all (multiprocessors held by another process):
  // one block per row draws the same tokens.
  Handled(status);
  return one_block_per_row();
}

bool LargeBlocksFit() { return sizeof(SampleShared<kSampleThreads>) <= BlockSharedMemoryLimit(); }

}  // namespace

cudaError_t SampleRows(cudaStream_t stream, const float* logits, int64_t ld, int64_t rows,
                       int64_t cols, const SamplingRow* rules, const PenaltyToken* seen,
                       int64_t seen_count, float* scratch, SampledToken* out, int blocks_per_row) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0 || cols > INT32_MAX || rows > INT32_MAX || ld < cols) {
    return cudaErrorInvalidValue;
  }
  return LargeBlocksFit() ? Launch<kSampleThreads>(stream, logits, ld, rows, cols, rules, seen,
                                                   seen_count, scratch, out, blocks_per_row)
                          : Launch<kSmallSampleThreads>(stream, logits, ld, rows, cols, rules, seen,
                                                        seen_count, scratch, out, blocks_per_row);
}

int MostSampleBlocksPerRow() {
  int device = 0;
  if (Handled(cudaGetDevice(&device)) != cudaSuccess) return 1;
  const int most = LargeBlocksFit() ? SetUpSampling<kSampleThreads>(device)
                                    : SetUpSampling<kSmallSampleThreads>(device);
  return most > 0 ? most : 1;
}

}  // namespace tandem::kernels::cuda
