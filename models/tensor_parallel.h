// Tensor parallelism (Megatron-style) over `ranks` workers, each holding a slice of every layer:
//  - attention: its query heads (q rows, o_proj columns) and the key/value heads they read (a
//    share of them, or with fewer KV heads than ranks the one its query heads read);
//  - MLPs and every expert: their intermediate channels (gate/up rows, down columns);
//  - Mamba-1: its inner channels (in_proj rows, conv, x_proj columns, dt_proj rows, A, D,
//    out_proj columns); x_proj's partial products are summed across the ranks;
//  - Mamba-2: its heads, and the B/C groups those heads read (a group is split when the ranks
//    divide the groups, else each rank keeps the one group its heads belong to); a gated norm
//    wider than a rank's channels takes its statistic summed across the ranks.
// Each sub-layer's output projection leaves a partial sum on every rank, which the ranks add
// together (kernels::Collectives::AllReduceSum) before the residual; an output bias is added by
// rank 0 alone. Embeddings, norms, routers and the LM head are replicated.
#ifndef TANDEM_MODELS_TENSOR_PARALLEL_H_
#define TANDEM_MODELS_TENSOR_PARALLEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model_config.h"

namespace tandem::models {

// Which slice of the model a worker holds: rank in [0, ranks).
struct TensorShard {
  int32_t rank = 0;
  int32_t ranks = 1;
  bool sharded() const { return ranks > 1; }
};

// The part of a stored tensor a rank loads: along dimension `dim`, the ranges [begin, end)
// kept, concatenated in order. No ranges = the whole tensor.
struct TensorSlice {
  int32_t dim = 0;
  std::vector<std::pair<int64_t, int64_t>> ranges;

  bool whole() const { return ranges.empty(); }
  // The length of the kept part along `dim`.
  int64_t kept() const;
  // The same ranges along another dimension (a matrix's columns, say).
  TensorSlice Along(int32_t other_dim) const;
};

// `shape` with its dimension slice.dim cut to the kept length; InvalidArgument when the slice
// does not fit the shape.
absl::StatusOr<std::vector<int64_t>> SlicedShape(const std::vector<int64_t>& shape,
                                                 const TensorSlice& slice);
// Copies the kept part of a row-major tensor of `shape` (elements of `element_bytes`) from `src`
// to `dst`, which holds the sliced shape (SlicedShape must have accepted it).
void CopySlice(const uint8_t* src, const std::vector<int64_t>& shape, size_t element_bytes,
               const TensorSlice& slice, uint8_t* dst);

// The rank's share of each of `segments` (consecutive parts of one dimension, e.g. gate ‖ up):
// piece `rank` of `ranks` equal pieces of each. Segments must divide evenly (ShardConfig
// checks the dimensions first).
TensorSlice ShardSegments(const TensorShard& shard, const std::vector<int64_t>& segments,
                          int32_t dim = 0);

// How `groups` shared by consecutive heads (Mamba-2's B/C groups, attention's key/value heads)
// fall to a rank: either each rank holds groups / ranks of them, or (fewer groups than ranks,
// the ranks a multiple of them) the one group its heads read, which several ranks then hold.
struct GroupShare {
  int32_t first = 0;  // the first group the rank holds
  int32_t count = 0;  // how many
};
GroupShare ShareOfGroups(int32_t groups, const TensorShard& shard);
GroupShare Mamba2Groups(const Mamba2Dims& full, const TensorShard& shard);
// The rows of k_proj (or v_proj) the rank keeps: its key/value heads.
TensorSlice KvHeadRows(const AttentionDims& full, const TensorShard& shard);

// The dimensions a rank runs. The gated norm of a rank whose norm group spans several ranks
// is marked by `norm_spans_ranks` (its statistic is summed across them).
AttentionDims ShardAttention(const AttentionDims& full, const TensorShard& shard);
Mamba1Dims ShardMamba1(const Mamba1Dims& full, const TensorShard& shard);
struct ShardedMamba2 {
  Mamba2Dims dims;
  bool norm_spans_ranks = false;
  int32_t full_inner = 0;  // the norm's width when it spans the ranks
};
ShardedMamba2 ShardMamba2(const Mamba2Dims& full, const TensorShard& shard);

// The configuration one rank's state is laid out by (heads, channels and intermediate sizes
// divided). InvalidArgument, naming the dimension and the rank count, when the model cannot be
// split that way (a head count, group count or intermediate size the ranks do not divide) or
// the shard itself is malformed.
absl::StatusOr<ModelConfig> ShardConfig(const ModelConfig& full, const TensorShard& shard);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_TENSOR_PARALLEL_H_
