// A loaded hybrid model: its layer graph (built from config.json) and weights, and the forward
// pass over a batch of sequences whose state (KV pages, SSM block) lives in caller-owned memory.
//
// Exactness contract (docs/ARCHITECTURE.md, "Exactness contracts"): running tokens [0, n) in one
// call, in several calls, or from a restored checkpoint gives the same state and logits up to
// fp32 rounding, for any page size.
#ifndef TANDEM_MODELS_MODEL_H_
#define TANDEM_MODELS_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/collectives.h"
#include "kernels/ops.h"
#include "kernels/workspace.h"
#include "models/attention_layer.h"
#include "models/checkpoint.h"
#include "models/feed_forward.h"
#include "models/forward_context.h"
#include "models/hydragen_config.h"
#include "models/mamba1_mixer.h"
#include "models/mamba2_mixer.h"
#include "models/model_config.h"
#include "models/state_layout.h"
#include "models/tensor_parallel.h"
#include "models/tensor_source.h"
#include "models/weight_store.h"
#include "models/zamba2_shared_block.h"

namespace tandem::models {

class TensorParallelGroup;

struct LoadOptions {
  int32_t page_tokens = 16;
  ConfigOptions config;
  // The format the matrices are kept in (`--weight-dtype`).
  WeightStorage weight_storage = WeightStorage::kAuto;
  // Where the weights go once loaded (null: host memory); must outlive the model. With a device
  // placer the model runs only on a backend that reads device memory (kernels/cuda/cuda_ops.h).
  TensorPlacer* placer = nullptr;
  // Called with a short description of each loading step ("layer 3/32", ...), for progress.
  std::function<void(const std::string&)> progress;
  // The slice of the model this worker holds (models/tensor_parallel.h); all of it by default.
  TensorShard shard;
};

// One sequence's part of a forward pass: its state, the new tokens to run, where to copy the SSM
// state along the way (checkpoints), and whether logits are wanted for every new token or only
// for the last one.
struct SequenceInput {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  std::span<const SsmSnapshot> snapshots;
  bool all_logits = false;
};

// Per-call settings of Model::Forward.
struct ForwardOptions {
  HydragenConfig hydragen;
  ForwardStats* stats = nullptr;  // when set, the pass adds its counts to it
  // Host scratch for the layer graph's own tables (ForwardContext::host), when `ws` is a
  // device's memory; null = `ws` serves both, as on the CPU.
  kernels::Workspace* host_scratch = nullptr;
  // A sharded model's link to the other workers, which run the same batch at the same time,
  // each on its own slice and state (required exactly when the model is sharded).
  kernels::Collectives* collectives = nullptr;
};

class Model {
 public:
  // Loads DIR (config.json + safetensors). Errors name the file and the tensor at fault; an
  // unknown architecture is refused by name; tensors the graph does not use are an error.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir,
                                                     const LoadOptions& options = {});
  // A model of `config`'s architecture with seeded random weights (benchmarks).
  static absl::StatusOr<std::unique_ptr<Model>> CreateRandom(const ModelConfig& config,
                                                             uint64_t seed,
                                                             const LoadOptions& options = {});

  // The whole model's configuration, whichever slice of it this object holds.
  const ModelConfig& config() const { return config_; }
  // This worker's slice (all of the model unless loaded with LoadOptions::shard).
  const TensorShard& shard() const { return shard_; }
  // Its state: a sharded worker's KV pages and SSM blocks hold its share of the heads.
  const StateLayout& layout() const { return layout_; }
  const std::string& dir() const { return dir_; }
  // Bytes of weights held; a tensor-parallel group's lead counts every worker's.
  size_t weight_bytes() const;
  // Host memory the weights still take beside the checkpoint's mapping (WeightStore::
  // host_bytes_held): 0 when they were placed on a device.
  size_t host_weight_bytes() const;
  // Values held (a group's lead: every worker's, replicated tensors counted once per worker).
  size_t parameters() const;
  // The placer the weights went through (LoadOptions::placer); null = host memory.
  const TensorPlacer* weight_placer() const { return weights_->placer(); }

  // Rows of logits Forward writes for `batch`: per sequence, its token count if all_logits,
  // else 1.
  static int64_t LogitRows(std::span<const SequenceInput> batch);

  // Runs every sequence's new tokens, appending them to its state (KV pages must already exist
  // for the new positions; the SSM block must hold the state after state->tokens tokens, zeroed
  // for a new sequence). Writes LogitRows(batch) × vocab logits, in batch order, unless
  // `logits` is null (a tensor-parallel worker other than the one that samples).
  // INVALID_ARGUMENT for out-of-vocabulary ids or bad snapshot positions, FAILED_PRECONDITION
  // for missing pages or SSM block; on those errors no state has been modified. INTERNAL: a
  // tensor-parallel pass failed partway, and the batch's states are lost.
  [[nodiscard]] absl::Status Forward(kernels::Ops& ops, kernels::Workspace& ws,
                                     std::span<const SequenceInput> batch, float* logits,
                                     const ForwardOptions& options = {}) const;

 private:
  struct DecoderLayer {
    LayerSpec spec;
    const float* input_norm = nullptr;
    std::optional<AttentionLayer> attention;
    std::optional<Mamba1Mixer> mamba1;
    std::optional<Mamba2Mixer> mamba2;
    const float* ffn_norm = nullptr;
    std::optional<GatedMlp> mlp;
    std::optional<MixtureOfExperts> moe;
    // Granite: the MLP that runs beside the experts (or alone, in a model without experts).
    std::optional<GatedMlp> shared_mlp;
    // Nemotron-H's MLP layers (ungated), and the shared expert beside Nemotron 3's experts.
    std::optional<PlainMlp> plain_mlp;
    std::optional<PlainMlp> shared_expert;
    // Zamba2 hybrid layers: the shared block (by index), this position's adapters, `linear`.
    Zamba2Adapters adapters;
    kernels::WeightMatrix hybrid_linear;
  };

  // `config` is the whole model's; `shard_config` its slice's (ShardConfig), which lays out
  // the state.
  Model(ModelConfig config, const ModelConfig& shard_config, int32_t page_tokens, TensorShard shard)
      : config_(std::move(config)),
        shard_(shard),
        layout_(shard_config, page_tokens, shard.ranks) {}
  static absl::StatusOr<std::unique_ptr<Model>> Create(ModelConfig config,
                                                       const LoadOptions& options);
  absl::Status LoadWeights(const LoadOptions& options);
  // The layer's mixer, as its spec says: attention under `attention_prefix`, or the SSM mixer
  // under `ssm_prefix` (Jamba and Granite layers hold one or the other).
  absl::Status LoadMixer(WeightStore& w, const std::string& attention_prefix,
                         const std::string& ssm_prefix, DecoderLayer& layer) const;
  absl::Status Validate(std::span<const SequenceInput> batch) const;
  void RunLayer(const DecoderLayer& layer, const ForwardContext& ctx, float* h,
                const float* embedding) const;

  std::string dir_;
  ModelConfig config_;
  TensorShard shard_;
  StateLayout layout_;
  std::unique_ptr<TensorSource> source_;
  std::unique_ptr<WeightStore> weights_;
  kernels::WeightMatrix embed_;       // [V, H]
  const float* final_norm_ = nullptr;  // [H]
  kernels::WeightMatrix lm_head_;     // [V, H] (the embedding when tied)
  std::vector<Zamba2SharedBlock> shared_blocks_;
  std::vector<DecoderLayer> layers_;
  // The group this model leads (set by it): its Forward runs every worker's.
  friend class TensorParallelGroup;
  TensorParallelGroup* group_ = nullptr;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_MODEL_H_
