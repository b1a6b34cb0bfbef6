// Combining values across the blocks of a thread block cluster (sm_90 and later), for kernels
// that give one row to a cluster of blocks: each block reduces its part of the row, then these
// combine the blocks' results through distributed shared memory. Every thread of every block of
// the cluster calls them together and gets the combined value. `combine` must be associative and
// commutative (integer sums, maxima), so the result does not depend on how many blocks share the
// row. Compiled for older GPUs they trap: the host launches clusters only where the device has
// them (cudaDevAttrClusterLaunch).
#ifndef TANDEM_KERNELS_CUDA_CLUSTER_REDUCE_CUH_
#define TANDEM_KERNELS_CUDA_CLUSTER_REDUCE_CUH_

#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace tandem::kernels::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TANDEM_HAVE_CLUSTERS 1
#endif

// The block's place in its cluster, and the cluster's size in blocks.
__device__ __forceinline__ unsigned ClusterRank() {
#ifdef TANDEM_HAVE_CLUSTERS
  return cooperative_groups::this_cluster().block_rank();
#else
  __trap();
  return 0;
#endif
}
__device__ __forceinline__ unsigned ClusterBlocks() {
#ifdef TANDEM_HAVE_CLUSTERS
  return cooperative_groups::this_cluster().num_blocks();
#else
  __trap();
  return 1;
#endif
}

// Every thread of every block of the cluster waits for all of them; their memory writes before
// it are seen by all after it.
__device__ __forceinline__ void ClusterSync() {
#ifdef TANDEM_HAVE_CLUSTERS
  cooperative_groups::this_cluster().sync();
#else
  __trap();
#endif
}

// combine() of the blocks' `values[i]` for i < n, in rank order, into this block's
// `combined[i]`. `values` and `combined` are this block's shared memory; `values` must hold the
// block's results, written before a __syncthreads(). On return every block has read every other
// block's values (they may be rewritten) and `combined` is visible to the whole block.
template <class T, class Combine>
__device__ void ClusterCombineEach(const T* values, T* combined, int n, Combine combine) {
#ifdef TANDEM_HAVE_CLUSTERS
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  cluster.sync();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    T total = cluster.map_shared_rank(values, 0)[i];
    for (unsigned r = 1; r < cluster.num_blocks(); ++r) {
      total = combine(total, cluster.map_shared_rank(values, r)[i]);
    }
    combined[i] = total;
  }
  cluster.sync();
#else
  __trap();
#endif
}

// The same for one value, `mine` being the block's (the same on all its threads); `slot` and
// `combined` are shared memory of this block.
template <class T, class Combine>
__device__ T ClusterCombine(T mine, T* slot, T* combined, Combine combine) {
  if (threadIdx.x == 0) *slot = mine;
  __syncthreads();
  ClusterCombineEach(slot, combined, 1, combine);
  return *combined;
}

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_CLUSTER_REDUCE_CUH_
