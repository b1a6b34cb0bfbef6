// Block-wide reductions for kernels that give one row (or a block's part of one) to a block of
// kThreads threads (a multiple of 32). Every thread of the block calls them together and gets the
// result. Sums are of integers (fixed-point values where fractions are summed), and the other
// reductions are maxima, so a row reduces to the same bits on every run, whatever the other
// rows of the launch hold and whatever order the values are combined in.
#ifndef TANDEM_KERNELS_CUDA_BLOCK_REDUCE_CUH_
#define TANDEM_KERNELS_CUDA_BLOCK_REDUCE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::cuda {

// Shared memory a block's reductions go through; one per kernel, reused call after call.
template <int kThreads>
struct BlockScratch {
  static constexpr int kWarps = kThreads / 32;
  uint64_t sums[kWarps + 1];
  int64_t ids[kThreads];
  float values[kThreads];
};

template <int kThreads>
__device__ uint64_t BlockSum(uint64_t v, BlockScratch<kThreads>& s) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) s.sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t total = 0;
    for (int w = 0; w < BlockScratch<kThreads>::kWarps; ++w) total += s.sums[w];
    s.sums[BlockScratch<kThreads>::kWarps] = total;
  }
  __syncthreads();
  const uint64_t total = s.sums[BlockScratch<kThreads>::kWarps];
  __syncthreads();  // everyone has read it before the next call writes
  return total;
}

// The largest of the threads' values.
template <int kThreads>
__device__ int64_t BlockMax(int64_t v, BlockScratch<kThreads>& s) {
  s.ids[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half && s.ids[threadIdx.x + half] > s.ids[threadIdx.x]) {
      s.ids[threadIdx.x] = s.ids[threadIdx.x + half];
    }
    __syncthreads();
  }
  const int64_t best = s.ids[0];
  __syncthreads();
  return best;
}

// A (value, id) candidate (id < 0: none), and which of two is the better: the larger value,
// the lower id among equal ones.
struct Candidate {
  float value = 0.0f;
  int64_t id = -1;
};
__device__ __forceinline__ Candidate Better(Candidate a, Candidate b) {
  if (b.id < 0) return a;
  if (a.id < 0 || b.value > a.value || (b.value == a.value && b.id < a.id)) return b;
  return a;
}

// Of the threads' (value, id) candidates, the best (Better); id -1 when no thread has one.
template <int kThreads>
__device__ Candidate BlockBestCandidate(float value, int64_t id, BlockScratch<kThreads>& s) {
  s.values[threadIdx.x] = value;
  s.ids[threadIdx.x] = id;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      const Candidate better = Better({s.values[threadIdx.x], s.ids[threadIdx.x]},
                                      {s.values[threadIdx.x + half], s.ids[threadIdx.x + half]});
      s.values[threadIdx.x] = better.value;
      s.ids[threadIdx.x] = better.id;
    }
    __syncthreads();
  }
  const Candidate best{s.values[0], s.ids[0]};
  __syncthreads();
  return best;
}

// The best candidate's id alone.
template <int kThreads>
__device__ int64_t BlockBest(float value, int64_t id, BlockScratch<kThreads>& s) {
  return BlockBestCandidate(value, id, s).id;
}

// kernels::ArgmaxRow of row[0, cols): each thread scans a strided part skipping NaN, the block
// keeps the largest value and, among equal ones, the lowest index; a row whose first value is
// NaN gives 0. Together that is ArgmaxRow's left-to-right rule.
template <int kThreads>
__device__ int32_t BlockArgmax(const float* row, int64_t cols, BlockScratch<kThreads>& s) {
  float best = 0.0f;
  int64_t best_index = -1;  // none yet
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float v = row[i];
    if (v != v) continue;  // NaN
    if (best_index < 0 || v > best) {
      best = v;
      best_index = i;
    }
  }
  const int64_t found = BlockBest(best, best_index, s);
  const float first = row[0];
  return first != first || found < 0 ? 0 : static_cast<int32_t>(found);
}

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_BLOCK_REDUCE_CUH_
