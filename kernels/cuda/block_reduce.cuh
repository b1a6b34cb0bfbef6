// Block-wide reductions for kernels that give one row to one block of kThreads threads (a
// multiple of 32). Every thread of the block calls them together and gets the result. The
// order of the additions is fixed by the thread count alone, so a row reduces to the same bits
// on every run and whatever the other rows of the launch hold.
#ifndef TANDEM_KERNELS_CUDA_BLOCK_REDUCE_CUH_
#define TANDEM_KERNELS_CUDA_BLOCK_REDUCE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::cuda {

// Shared memory a block's reductions go through; one per kernel, reused call after call.
template <int kThreads>
struct BlockScratch {
  static constexpr int kWarps = kThreads / 32;
  double sums[kWarps + 1];
  int64_t ids[kThreads];
  float values[kThreads];
};

template <int kThreads>
__device__ double BlockSum(double v, BlockScratch<kThreads>& s) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) s.sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < BlockScratch<kThreads>::kWarps; ++w) total += s.sums[w];
    s.sums[BlockScratch<kThreads>::kWarps] = total;
  }
  __syncthreads();
  const double total = s.sums[BlockScratch<kThreads>::kWarps];
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

// Of the threads' (value, id) candidates (id < 0: none), the largest value, the lowest id among
// equal ones; -1 when no thread has one.
template <int kThreads>
__device__ int64_t BlockBest(float value, int64_t id, BlockScratch<kThreads>& s) {
  s.values[threadIdx.x] = value;
  s.ids[threadIdx.x] = id;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      const float v = s.values[threadIdx.x + half];
      const int64_t i = s.ids[threadIdx.x + half];
      const int64_t mine = s.ids[threadIdx.x];
      if (i >= 0 &&
          (mine < 0 || v > s.values[threadIdx.x] || (v == s.values[threadIdx.x] && i < mine))) {
        s.values[threadIdx.x] = v;
        s.ids[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  const int64_t best = s.ids[0];
  __syncthreads();
  return best;
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
