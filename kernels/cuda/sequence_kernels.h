// CUDA versions of the recurrent ops of kernels/ops.h (the contracts are there): causal conv1d,
// the Mamba-1 selective scan and the Mamba-2 SSD scan, each with state snapshots at any token
// (Marconi's checkpoints); attention is in attention_kernels.h. The args structs are the CPU
// ones; every pointer in them is device memory: activations, weights, `state` and each
// snapshot's `dst`. The snapshot list itself is a host array, passed to the kernels by value (at
// most kMaxSnapshots). A varlen call (args.sequences) is one launch with a
// grid row per sequence; its tables, the flat snapshot table included, are device memory, so
// its snapshots are not limited in number.
//
// Each call enqueues its work on `stream` and returns the launch error, or cudaErrorInvalidValue
// for arguments the kernels cannot take. The scans run the recurrence token by token with a
// row's state spread over a warp's lanes, in tiles of tokens whose inputs are loaded together
// before the tile is computed (one memory round trip per tile, not per token). Each token's
// arithmetic is the one-token call's, so a prefill gives the bits of its decode steps. A
// prefill's warp runs up to 4 rows that share B and C, loading them once for all its rows, which
// changes no row's bits. The chunked SSD algorithm (token-parallel, on the tensor cores) is not
// used.
#ifndef TANDEM_KERNELS_CUDA_SEQUENCE_KERNELS_H_
#define TANDEM_KERNELS_CUDA_SEQUENCE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "kernels/ops.h"

namespace tandem::kernels::cuda {

inline constexpr int kMaxSnapshots = 32;
inline constexpr int kMaxConvKernel = 8;

// Also serves one token (decode).
cudaError_t CausalConv1d(cudaStream_t stream, const CausalConvArgs& args);
// Also serves SelectiveStateUpdate (one token).
cudaError_t SelectiveScan(cudaStream_t stream, const SelectiveScanArgs& args);
// Also serves SsdStateUpdate (one token). args.chunk_size is not used (see above).
cudaError_t SsdScan(cudaStream_t stream, const SsdScanArgs& args);

// The scans with a prefill's rows per warp named (1, 2 or 4; 0 picks as the calls above do), for
// tests and benchmarks that compare them. The SSD's must divide args.head_dim (a warp's rows are
// one head's).
cudaError_t SelectiveScanWithRowsPerWarp(cudaStream_t stream, const SelectiveScanArgs& args,
                                         int rows_per_warp);
cudaError_t SsdScanWithRowsPerWarp(cudaStream_t stream, const SsdScanArgs& args, int rows_per_warp);

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_SEQUENCE_KERNELS_H_
