#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/moe_kernels.h"
#include "kernels/moe_routing.h"
#include "kernels/cuda/warp_math.cuh"

namespace tandem::kernels::cuda {
namespace {

// One thread per token: experts and top_k are small, and RouteToken is the host backends' own
// code, so the device picks the experts they pick.
__global__ void MoeRouteKernel(const float* logits, int64_t tokens, int32_t experts, int32_t top_k,
                               MoeRouting routing, int32_t* chosen, float* weights) {
  const int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  RouteToken(logits + t * experts, experts, top_k, routing, chosen + t * top_k,
             weights + t * top_k);
}

// One block; thread e owns expert e: it counts its entries, and after the offsets are summed,
// places them in token order, so the layout is the same every run.
__global__ void MoeBucketKernel(const int32_t* chosen, int64_t entries, int32_t experts,
                                int64_t* offsets, int32_t* rows, int32_t* position, int32_t top_k) {
  __shared__ int64_t counts[kMaxMoeExperts];
  for (int32_t e = threadIdx.x; e < experts; e += blockDim.x) {
    int64_t count = 0;
    for (int64_t i = 0; i < entries; ++i) count += chosen[i] == e;
    counts[e] = count;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t running = 0;
    for (int32_t e = 0; e < experts; ++e) {
      offsets[e] = running;
      running += counts[e];
      counts[e] = offsets[e];  // from here on: the next free slot of expert e
    }
    offsets[experts] = running;
  }
  __syncthreads();
  for (int32_t e = threadIdx.x; e < experts; e += blockDim.x) {
    int64_t next = counts[e];
    for (int64_t i = 0; i < entries; ++i) {
      if (chosen[i] != e) continue;
      rows[next] = static_cast<int32_t>(i / top_k);
      position[i] = static_cast<int32_t>(next);
      ++next;
    }
  }
}

__global__ void MoeCombineKernel(const float* y, int64_t ld_y, const int32_t* position,
                                 const float* weights, int64_t tokens, int32_t top_k,
                                 int64_t hidden, float* out, int64_t ld_out) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= tokens * hidden) return;
  const int64_t t = i / hidden, c = i % hidden;
  float sum = 0.0f;
  for (int32_t j = 0; j < top_k; ++j) {
    sum += weights[t * top_k + j] * y[int64_t{position[t * top_k + j]} * ld_y + c];
  }
  out[t * ld_out + c] = sum;
}

}  // namespace

cudaError_t MoeRoute(cudaStream_t stream, const float* logits, int64_t tokens, int32_t experts,
                     int32_t top_k, const MoeRouting& routing, int32_t* chosen,
                     float* weights) {
  if (tokens <= 0) return cudaSuccess;
  if (experts < 1 || experts > kMaxMoeExperts || top_k < 1 || top_k > experts ||
      !RoutingFits(routing, experts, top_k)) {
    return cudaErrorInvalidValue;
  }
  MoeRouteKernel<<<Blocks(tokens, 128), 128, 0, stream>>>(logits, tokens, experts, top_k,
                                                          routing, chosen, weights);
  return cudaGetLastError();
}

cudaError_t MoeBucket(cudaStream_t stream, const int32_t* chosen, int64_t tokens, int32_t experts,
                      int32_t top_k, int64_t* offsets, int32_t* rows, int32_t* position) {
  if (experts < 1 || experts > kMaxMoeExperts || top_k < 1 || tokens * top_k > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  const int threads = experts < 256 ? ((experts + 31) / 32) * 32 : 256;
  MoeBucketKernel<<<1, threads, 0, stream>>>(chosen, tokens * top_k, experts, offsets, rows,
                                             position, top_k);
  return cudaGetLastError();
}

cudaError_t MoeCombine(cudaStream_t stream, const float* y, int64_t ld_y, const int32_t* position,
                       const float* weights, int64_t tokens, int32_t top_k, int64_t hidden,
                       float* out, int64_t ld_out) {
  if (tokens <= 0 || hidden <= 0) return cudaSuccess;
  if (top_k < 1) return cudaErrorInvalidValue;
  constexpr int kThreads = 256;
  MoeCombineKernel<<<Blocks(tokens * hidden, kThreads), kThreads, 0, stream>>>(
      y, ld_y, position, weights, tokens, top_k, hidden, out, ld_out);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda
