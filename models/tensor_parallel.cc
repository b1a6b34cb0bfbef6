#include "models/tensor_parallel.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::models {
namespace {

bool HasMixer(const ModelConfig& c, MixerKind kind) {
  for (const LayerSpec& layer : c.layers) {
    if (layer.mixer == kind) return true;
  }
  return false;
}

bool HasFfn(const ModelConfig& c, FfnKind kind) {
  for (const LayerSpec& layer : c.layers) {
    if (layer.ffn == kind) return true;
  }
  return false;
}

}  // namespace

int64_t TensorSlice::kept() const {
  int64_t total = 0;
  for (const auto& [begin, end] : ranges) total += end - begin;
  return total;
}

TensorSlice TensorSlice::Along(int32_t other_dim) const {
  TensorSlice slice = *this;
  slice.dim = other_dim;
  return slice;
}

absl::StatusOr<std::vector<int64_t>> SlicedShape(const std::vector<int64_t>& shape,
                                                 const TensorSlice& slice) {
  if (slice.whole()) return shape;
  if (slice.dim < 0 || static_cast<size_t>(slice.dim) >= shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a slice along dimension ", slice.dim, " of a ", shape.size(), "-D tensor"));
  }
  for (const auto& [begin, end] : slice.ranges) {
    if (begin < 0 || begin > end || end > shape[slice.dim]) {
      return absl::InvalidArgumentError(absl::StrCat("a slice [", begin, ", ", end,
                                                     ") of dimension ", slice.dim, " of size ",
                                                     shape[slice.dim]));
    }
  }
  std::vector<int64_t> sliced = shape;
  sliced[slice.dim] = slice.kept();
  return sliced;
}

void CopySlice(const uint8_t* src, const std::vector<int64_t>& shape, size_t element_bytes,
               const TensorSlice& slice, uint8_t* dst) {
  int64_t outer = 1;
  for (int32_t d = 0; d < slice.dim; ++d) outer *= shape[d];
  size_t inner = element_bytes;
  for (size_t d = static_cast<size_t>(slice.dim) + 1; d < shape.size(); ++d) {
    inner *= static_cast<size_t>(shape[d]);
  }
  const size_t stride = static_cast<size_t>(shape[slice.dim]) * inner;
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* from = src + static_cast<size_t>(o) * stride;
    for (const auto& [begin, end] : slice.ranges) {
      const size_t bytes = static_cast<size_t>(end - begin) * inner;
      std::copy(from + static_cast<size_t>(begin) * inner,
                from + static_cast<size_t>(begin) * inner + bytes, dst);
      dst += bytes;
    }
  }
}

TensorSlice ShardSegments(const TensorShard& shard, const std::vector<int64_t>& segments,
                          int32_t dim) {
  TensorSlice slice;
  slice.dim = dim;
  if (!shard.sharded()) return slice;
  int64_t offset = 0;
  for (int64_t size : segments) {
    const int64_t piece = size / shard.ranks;
    slice.ranges.emplace_back(offset + shard.rank * piece, offset + (shard.rank + 1) * piece);
    offset += size;
  }
  return slice;
}

GroupShare ShareOfGroups(int32_t groups, const TensorShard& shard) {
  if (groups % shard.ranks == 0) {
    const int32_t count = groups / shard.ranks;
    return {shard.rank * count, count};
  }
  // Fewer groups than ranks (ShardConfig checks the ranks divide into them): each group's heads
  // span ranks / groups ranks.
  return {shard.rank / (shard.ranks / groups), 1};
}

GroupShare Mamba2Groups(const Mamba2Dims& full, const TensorShard& shard) {
  return ShareOfGroups(full.groups, shard);
}

TensorSlice KvHeadRows(const AttentionDims& full, const TensorShard& shard) {
  TensorSlice slice;
  if (!shard.sharded()) return slice;
  const GroupShare share = ShareOfGroups(full.kv_heads, shard);
  slice.ranges.emplace_back(int64_t{share.first} * full.head_dim,
                            int64_t{share.first + share.count} * full.head_dim);
  return slice;
}

AttentionDims ShardAttention(const AttentionDims& full, const TensorShard& shard) {
  AttentionDims dims = full;
  dims.heads = full.heads / shard.ranks;
  dims.kv_heads = ShareOfGroups(full.kv_heads, shard).count;
  return dims;
}

Mamba1Dims ShardMamba1(const Mamba1Dims& full, const TensorShard& shard) {
  Mamba1Dims dims = full;
  dims.inner = full.inner / shard.ranks;
  return dims;
}

ShardedMamba2 ShardMamba2(const Mamba2Dims& full, const TensorShard& shard) {
  ShardedMamba2 sharded;
  sharded.dims = full;
  sharded.full_inner = full.inner;
  Mamba2Dims& dims = sharded.dims;
  dims.inner = full.inner / shard.ranks;
  dims.heads = full.heads / shard.ranks;
  dims.groups = Mamba2Groups(full, shard).count;
  if (full.norm_groups % shard.ranks == 0) {
    dims.norm_groups = full.norm_groups / shard.ranks;
  } else {
    // One norm group over all channels (ShardConfig refuses the groupings in between).
    dims.norm_groups = 1;
    sharded.norm_spans_ranks = true;
  }
  return sharded;
}

absl::StatusOr<ModelConfig> ShardConfig(const ModelConfig& full, const TensorShard& shard) {
  const int32_t n = shard.ranks;
  if (n < 1 || shard.rank < 0 || shard.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-parallel rank ", shard.rank, " is outside [0, ", n, ") ranks"));
  }
  if (n == 1) return full;
  auto refuse = [&](const std::string& what, int64_t value) {
    return absl::InvalidArgumentError(absl::StrCat("tensor parallelism over ", n,
                                                   " ranks: ", full.architecture, "'s ", what, " (",
                                                   value, ") is not divisible by ", n));
  };
  ModelConfig c = full;
  if (full.num_attention_layers > 0) {
    if (full.attention.heads % n != 0) return refuse("attention head count", full.attention.heads);
    const int32_t kv = full.attention.kv_heads;
    if (kv % n != 0 && n % kv != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor parallelism over ", n, " ranks: ", full.architecture, "'s ", kv,
                       " key/value heads neither divide among nor into the ranks"));
    }
    c.attention = ShardAttention(full.attention, shard);
  }
  if (HasMixer(full, MixerKind::kMamba1)) {
    if (full.mamba1.inner % n != 0) return refuse("Mamba inner width", full.mamba1.inner);
    c.mamba1 = ShardMamba1(full.mamba1, shard);
  }
  if (HasMixer(full, MixerKind::kMamba2)) {
    const Mamba2Dims& m = full.mamba2;
    if (m.heads % n != 0) return refuse("Mamba-2 head count", m.heads);
    if (m.groups % n != 0 && n % m.groups != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor parallelism over ", n, " ranks: ", full.architecture, "'s ",
                       m.groups, " Mamba-2 groups neither divide among nor into the ranks"));
    }
    if (m.norm_groups % n != 0 && m.norm_groups != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor parallelism over ", n, " ranks: ", full.architecture, "'s ", m.norm_groups,
          " gated-norm groups would each span some of the ranks (supported: a multiple of the "
          "ranks, or one group)"));
    }
    c.mamba2 = ShardMamba2(m, shard).dims;
  }
  // intermediate_size is the dense MLPs' width (Jamba, Bamba, Nemotron-H's MLP layers) and
  // Zamba2's shared block's; Granite's dense layers run its shared MLP alone.
  const bool dense = full.family == Family::kZamba2 ||
                     (full.family != Family::kGraniteHybrid && HasFfn(full, FfnKind::kDense));
  if (dense && full.intermediate_size > 0) {
    if (full.intermediate_size % n != 0) return refuse("MLP width", full.intermediate_size);
    c.intermediate_size = full.intermediate_size / n;
  }
  if (HasFfn(full, FfnKind::kMoe)) {
    if (full.expert_intermediate_size % n != 0) {
      return refuse("expert MLP width", full.expert_intermediate_size);
    }
    c.expert_intermediate_size = full.expert_intermediate_size / n;
  }
  if (full.shared_mlp_intermediate > 0) {
    if (full.shared_mlp_intermediate % n != 0) {
      return refuse("shared MLP width", full.shared_mlp_intermediate);
    }
    c.shared_mlp_intermediate = full.shared_mlp_intermediate / n;
  }
  return c;
}

}  // namespace tandem::models
