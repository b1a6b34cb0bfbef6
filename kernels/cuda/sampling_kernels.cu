#include "kernels/cuda/sampling_kernels.h"

#include <cuda_runtime.h>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/threshold_draw.h"

namespace tandem::kernels::cuda {
namespace {

// A whole row per block: a 256K vocabulary is 1,024 weights per thread per reduction.
constexpr int kSampleThreads = 256;

// DrawByThresholds' reductions over one row of weights, block-wide.
class BlockRow {
 public:
  __device__ BlockRow(const float* weights, int64_t cols, BlockScratch<kSampleThreads>& scratch)
      : w_(weights), cols_(cols), scratch_(scratch) {}
  __device__ int64_t cols() const { return cols_; }

  template <class Keep>
  __device__ double Sum(Keep keep, bool count) {
    double total = 0;
    for (int64_t i = threadIdx.x; i < cols_; i += kSampleThreads) {
      const float w = w_[i];
      if (keep(__float_as_uint(w), static_cast<int32_t>(i))) total += count ? 1.0 : w;
    }
    return BlockSum(total, scratch_);
  }

  template <class Keep>
  __device__ int32_t MaxId(Keep keep) {
    int64_t best = -1;
    for (int64_t i = threadIdx.x; i < cols_; i += kSampleThreads) {
      if (keep(__float_as_uint(w_[i]), static_cast<int32_t>(i))) best = i;
    }
    return static_cast<int32_t>(BlockMax(best, scratch_));
  }

 private:
  const float* w_;
  int64_t cols_;
  BlockScratch<kSampleThreads>& scratch_;
};

__global__ void SampleRowsKernel(float* logits, int64_t ld, int64_t cols,
                                 const SamplingRow* rules, const PenaltyToken* seen,
                                 int64_t seen_count, int32_t* out) {
  __shared__ BlockScratch<kSampleThreads> scratch;
  const SamplingRow rule = rules[blockIdx.x];
  float* row = logits + int64_t{blockIdx.x} * ld;

  // Penalties: the row's tokens are distinct, so each thread rewrites its own.
  const bool seen_valid = rule.penalties_begin >= 0 &&
                          rule.penalties_end >= rule.penalties_begin &&
                          rule.penalties_end <= seen_count;
  if (rule.penalties.active() && seen_valid) {
    for (int64_t j = rule.penalties_begin + threadIdx.x; j < rule.penalties_end;
         j += kSampleThreads) {
      const PenaltyToken t = seen[j];
      if (t.token >= 0 && t.token < cols) {
        row[t.token] = PenalisedLogit(row[t.token], rule.penalties, t.generated);
      }
    }
  }
  __syncthreads();

  // Greedy rows, and rows with a NaN or no finite maximum, give their argmax.
  const int32_t argmax = BlockArgmax(row, cols, scratch);
  int any_nan = 0;
  for (int64_t i = threadIdx.x; i < cols; i += kSampleThreads) any_nan |= row[i] != row[i];
  any_nan = __syncthreads_or(any_nan);
  const float max_logit = row[argmax];
  if (rule.greedy || any_nan || !isfinite(max_logit)) {
    if (threadIdx.x == 0) out[blockIdx.x] = argmax;
    return;
  }
  __syncthreads();  // every thread has read row[argmax] before it is overwritten

  const double inv_t = 1.0 / static_cast<double>(rule.temperature);
  for (int64_t i = threadIdx.x; i < cols; i += kSampleThreads) {
    // kernels::CandidateWeight, with the device's expf.
    row[i] = expf(static_cast<float>((static_cast<double>(row[i]) - max_logit) * inv_t));
  }
  __syncthreads();
  BlockRow weights(row, cols, scratch);
  const int32_t token = DrawByThresholds(weights, rule);
  if (threadIdx.x == 0) out[blockIdx.x] = token;
}

}  // namespace

cudaError_t SampleRows(cudaStream_t stream, float* logits, int64_t ld, int64_t rows, int64_t cols,
                       const SamplingRow* rules, const PenaltyToken* seen, int64_t seen_count,
                       int32_t* out) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0 || cols > INT32_MAX || rows > INT32_MAX || ld < cols) {
    return cudaErrorInvalidValue;
  }
  SampleRowsKernel<<<static_cast<unsigned>(rows), kSampleThreads, 0, stream>>>(
      logits, ld, cols, rules, seen, seen_count, out);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda
