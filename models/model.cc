#include "models/model.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/status_macros.h"
#include "models/tensor_parallel_group.h"

namespace tandem::models {
namespace {

// Tensor-name prefixes of each family's checkpoints.
struct Names {
  std::string embed;
  std::vector<std::string> embed_alternatives;
  std::string final_norm;
};

Names NamesFor(Family family) {
  switch (family) {
    case Family::kJamba:
      return {"model.embed_tokens.weight", {}, "model.final_layernorm.weight"};
    case Family::kZamba2:
    case Family::kBamba:
      return {"model.embed_tokens.weight", {}, "model.final_layernorm.weight"};
    case Family::kMamba2:
      // Original state-spaces checkpoints call it backbone.embedding.
      return {
          "backbone.embeddings.weight", {"backbone.embedding.weight"}, "backbone.norm_f.weight"};
    case Family::kGraniteHybrid:
      return {"model.embed_tokens.weight", {}, "model.norm.weight"};
    case Family::kNemotronH:
      // Hub checkpoints (and transformers 5's saves) use backbone.*; a v5 model's own module
      // names, model.*, are accepted too.
      return {"backbone.embeddings.weight", {"model.embeddings.weight"}, "backbone.norm_f.weight"};
  }
  return {};
}

// The tables a pass hands the backend's kernels (ForwardContext), built once per pass in the
// backend's memory before any layer's mark, so that they outlive every layer's scratch. Also
// points each segment at its page table.
struct PassTables {
  float* const* ssm_blocks = nullptr;
  kernels::VarlenSequences sequences;
  float* const* const* row_page_tables = nullptr;
  const int64_t* row_positions = nullptr;
};

// Every table of a pass in one region of the backend's memory, written on the host and copied
// over in one upload (Ops::UploadTables): a device makes one copy per pass whatever the batch,
// as a CUDA graph's single copy node needs. The layout is fixed before anything is written,
// because tables hold addresses inside the region (each row's page table points into the table
// of every sequence's pages).
//
// The region's size is rounded up to a power of two, and the one table whose size changes from
// step to step (the pages, one more every page_tokens tokens) goes last: so consecutive decode
// steps of a batch find every table the kernels are given, and every buffer taken after the
// region, at the same addresses, and a device can replay the previous step's launches
// (kernels/cuda/cuda_ops.h). (Each sequence's own page table moves as the ones before it grow;
// decode kernels reach it through the per-row table, as data, never as an argument.)
class TableRegion {
 public:
  // Room for `count` T's; returns its offset.
  template <typename T>
  size_t Reserve(size_t count) {
    const size_t at = (size_ + kAlign - 1) / kAlign * kAlign;
    size_ = at + count * sizeof(T);
    return at;
  }
  void Allocate(kernels::Ops& ops, kernels::Workspace& ws, kernels::Workspace& host) {
    size_ = std::bit_ceil(std::max<size_t>(size_, kMinBytes));
    device_ = ws.Array<std::byte>(size_);
    host_ = ops.activations_on_host() ? device_ : host.Array<std::byte>(size_);
  }
  template <typename T>
  T* Host(size_t at) const {  // where the host writes it
    return reinterpret_cast<T*>(host_ + at);
  }
  template <typename T>
  T* Device(size_t at) const {  // where the kernels read it
    return reinterpret_cast<T*>(device_ + at);
  }
  void Upload(kernels::Ops& ops) const { ops.UploadTables(device_, host_, size_); }

 private:
  static constexpr size_t kAlign = 16;
  static constexpr size_t kMinBytes = 1024;
  size_t size_ = 0;
  std::byte* device_ = nullptr;
  std::byte* host_ = nullptr;
};

PassTables BuildPassTables(kernels::Ops& ops, kernels::Workspace& ws, kernels::Workspace& host,
                           std::span<const SequenceInput> batch, std::span<Segment> segments,
                           int64_t rows, bool attention, bool ssm) {
  const size_t n = batch.size();
  const size_t row_count = static_cast<size_t>(rows);
  size_t total_pages = 0;
  size_t total_snapshots = 0;
  for (const SequenceInput& in : batch) {
    total_pages += in.state->kv_pages.size();
    total_snapshots += in.snapshots.size();
  }
  if (!ssm) total_snapshots = 0;
  TableRegion region;
  const size_t row_tables_at = attention ? region.Reserve<float* const*>(row_count) : 0;
  const size_t positions_at = attention ? region.Reserve<int64_t>(row_count) : 0;
  const size_t cu_seqlens_at = region.Reserve<int64_t>(n + 1);
  const size_t blocks_at = ssm ? region.Reserve<float*>(n) : 0;
  const size_t cu_snapshots_at = total_snapshots > 0 ? region.Reserve<int32_t>(n + 1) : 0;
  const size_t snapshots_at =
      total_snapshots > 0 ? region.Reserve<kernels::BlockSnapshot>(total_snapshots) : 0;
  const size_t pages_at = attention ? region.Reserve<float*>(total_pages) : 0;  // last: it grows
  region.Allocate(ops, ws, host);

  PassTables tables;
  if (attention) {
    // Every sequence's page table back to back; each segment points at its part.
    float** all_pages = region.Host<float*>(pages_at);
    float* const* device_pages = region.Device<float*>(pages_at);
    size_t at = 0;
    for (size_t s = 0; s < n; ++s) {
      const std::vector<float*>& pages = batch[s].state->kv_pages;
      std::copy(pages.begin(), pages.end(), all_pages + at);
      segments[s].page_table = device_pages + at;  // an address in the table, not a read
      at += pages.size();
    }
    // Per row: its sequence's page table and its position.
    auto** row_tables = region.Host<float* const*>(row_tables_at);
    int64_t* positions = region.Host<int64_t>(positions_at);
    for (const Segment& seg : segments) {
      for (int64_t t = 0; t < seg.tokens; ++t) {
        row_tables[seg.row + t] = seg.page_table;
        positions[seg.row + t] = seg.start_pos + t;
      }
    }
    tables.row_page_tables = region.Device<float* const*>(row_tables_at);
    tables.row_positions = region.Device<int64_t>(positions_at);
  }
  int64_t* cu_seqlens = region.Host<int64_t>(cu_seqlens_at);
  cu_seqlens[0] = 0;
  for (size_t s = 0; s < n; ++s) cu_seqlens[s + 1] = cu_seqlens[s] + segments[s].tokens;
  tables.sequences.count = static_cast<int64_t>(n);
  tables.sequences.cu_seqlens = region.Device<int64_t>(cu_seqlens_at);
  if (ssm) {
    float** blocks = region.Host<float*>(blocks_at);
    for (size_t s = 0; s < n; ++s) blocks[s] = batch[s].state->ssm;
    tables.ssm_blocks = region.Device<float*>(blocks_at);
    if (total_snapshots > 0) {
      int32_t* cu_snapshots = region.Host<int32_t>(cu_snapshots_at);
      auto* flat = region.Host<kernels::BlockSnapshot>(snapshots_at);
      cu_snapshots[0] = 0;
      for (size_t s = 0; s < n; ++s) {
        std::copy(batch[s].snapshots.begin(), batch[s].snapshots.end(), flat + cu_snapshots[s]);
        cu_snapshots[s + 1] = cu_snapshots[s] + static_cast<int32_t>(batch[s].snapshots.size());
      }
      tables.sequences.cu_snapshots = region.Device<int32_t>(cu_snapshots_at);
      tables.sequences.snapshots = region.Device<kernels::BlockSnapshot>(snapshots_at);
    }
  }
  region.Upload(ops);
  return tables;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(ModelConfig config,
                                                     const LoadOptions& options) {
  if (options.page_tokens <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page size must be positive, got ", options.page_tokens));
  }
  TANDEM_ASSIGN_OR_RETURN(const ModelConfig shard_config, ShardConfig(config, options.shard));
  return std::unique_ptr<Model>(
      new Model(std::move(config), shard_config, options.page_tokens, options.shard));
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir,
                                                   const LoadOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir, options.config));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Create(std::move(config), options));
  model->dir_ = dir;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(dir));
  model->source_ = std::make_unique<CheckpointTensorSource>(std::move(checkpoint));
  model->weights_ =
      std::make_unique<WeightStore>(*model->source_, options.weight_storage, options.placer);
  TANDEM_RETURN_IF_ERROR(model->LoadWeights(options));
  return model;
}

absl::StatusOr<std::unique_ptr<Model>> Model::CreateRandom(const ModelConfig& config, uint64_t seed,
                                                           const LoadOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Create(config, options));
  model->dir_ = "(random weights)";
  model->source_ = std::make_unique<RandomTensorSource>(seed);
  model->weights_ =
      std::make_unique<WeightStore>(*model->source_, options.weight_storage, options.placer);
  TANDEM_RETURN_IF_ERROR(model->LoadWeights(options));
  return model;
}

absl::Status Model::LoadWeights(const LoadOptions& options) {
  WeightStore& w = *weights_;
  const ModelConfig& c = config_;
  const TensorShard& shard = shard_;
  const int64_t h = c.hidden_size, v = c.vocab_size;
  auto progress = [&](const std::string& what) {
    if (options.progress) options.progress(what);
  };

  const Names names = NamesFor(c.family);
  std::string embed_name = names.embed;
  for (const std::string& alt : names.embed_alternatives) {
    if (!w.Has(embed_name) && w.Has(alt)) embed_name = alt;
  }
  // Nemotron-H's tensors all sit under the root its embedding was found under.
  const std::string root = embed_name.substr(0, embed_name.find('.') + 1);
  const std::string final_norm =
      c.family == Family::kNemotronH ? root + "norm_f.weight" : names.final_norm;
  progress("embeddings");
  TANDEM_ASSIGN_OR_RETURN(embed_, w.Embedding(embed_name, v, h));
  // Only tensor-parallel worker 0 computes logits: the others hold no head (an untied one is a
  // vocabulary × hidden matrix per worker).
  const bool computes_logits = shard.rank == 0;
  if (computes_logits) {
    TANDEM_ASSIGN_OR_RETURN(final_norm_, w.Get(final_norm, {h}));
  }
  if (!computes_logits) {
    // final_norm_ and lm_head_ stay empty.
  } else if (c.tie_word_embeddings && w.storage() != WeightStorage::kInt8) {
    lm_head_ = embed_;
  } else if (c.tie_word_embeddings) {
    // The embedding rows are gathered in their float format; the head multiplies in int8.
    TANDEM_ASSIGN_OR_RETURN(lm_head_, w.SecondCopy(embed_name, v, h));
  } else {
    TANDEM_ASSIGN_OR_RETURN(lm_head_, w.Matrix("lm_head.weight", v, h));
  }

  // Zamba2: each tied shared tensor is stored once, under the prefix of one of the hybrid
  // layers that use it; try them in order.
  SharedTensorResolver resolve = [&](int32_t block, const std::string& suffix) -> std::string {
    for (size_t k = 0; k < c.hybrid_layer_ids.size(); ++k) {
      if (static_cast<int32_t>(k) % c.num_mem_blocks != block) continue;
      std::string name =
          absl::StrCat("model.layers.", c.hybrid_layer_ids[k], ".shared_transformer.", suffix);
      if (w.Has(name)) return name;
    }
    return "";
  };
  if (c.family == Family::kZamba2) {
    const int32_t blocks = std::min<int32_t>(c.num_mem_blocks, c.hybrid_layer_ids.size());
    for (int32_t b = 0; b < blocks; ++b) {
      progress(absl::StrCat("shared block ", b + 1, "/", blocks));
      TANDEM_ASSIGN_OR_RETURN(Zamba2SharedBlock block,
                              Zamba2SharedBlock::Load(w, resolve, b, c, shard));
      shared_blocks_.push_back(std::move(block));
    }
  }

  for (int32_t i = 0; i < c.num_layers; ++i) {
    progress(absl::StrCat("layer ", i + 1, "/", c.num_layers));
    DecoderLayer layer;
    layer.spec = c.layers[i];
    const std::string base = absl::StrCat("model.layers.", i, ".");
    switch (c.family) {
      case Family::kJamba:
      case Family::kBamba: {  // Bamba: Jamba's layer names, Mamba-2 mixers, dense MLPs
        TANDEM_ASSIGN_OR_RETURN(layer.input_norm, w.Get(base + "input_layernorm.weight", {h}));
        TANDEM_RETURN_IF_ERROR(LoadMixer(w, base + "self_attn.", base + "mamba.", layer));
        TANDEM_ASSIGN_OR_RETURN(layer.ffn_norm, w.Get(base + "pre_ff_layernorm.weight", {h}));
        if (layer.spec.ffn == FfnKind::kMoe) {
          TANDEM_ASSIGN_OR_RETURN(layer.moe,
                                  MixtureOfExperts::Load(w, base + "feed_forward.", c, shard));
        } else {
          TANDEM_ASSIGN_OR_RETURN(layer.mlp,
                                  GatedMlp::Load(w, base + "feed_forward.", c.hidden_size,
                                                 c.intermediate_size, c.ffn_activation, shard));
        }
        break;
      }
      case Family::kZamba2: {
        const std::string mp = layer.spec.zamba2_hybrid ? base + "mamba_decoder." : base;
        TANDEM_ASSIGN_OR_RETURN(layer.input_norm, w.Get(mp + "input_layernorm.weight", {h}));
        TANDEM_ASSIGN_OR_RETURN(
            layer.mamba2, Mamba2Mixer::Load(w, mp + "mamba.", c, layer.spec.ssm_index, shard));
        if (layer.spec.zamba2_hybrid) {
          TANDEM_ASSIGN_OR_RETURN(
              layer.adapters,
              Zamba2SharedBlock::LoadAdapters(w, resolve, layer.spec.hybrid_position, c, shard));
          TANDEM_ASSIGN_OR_RETURN(layer.hybrid_linear, w.Matrix(base + "linear.weight", h, h));
        }
        break;
      }
      case Family::kMamba2: {
        const std::string bp = absl::StrCat("backbone.layers.", i, ".");
        TANDEM_ASSIGN_OR_RETURN(layer.input_norm, w.Get(bp + "norm.weight", {h}));
        TANDEM_ASSIGN_OR_RETURN(
            layer.mamba2, Mamba2Mixer::Load(w, bp + "mixer.", c, layer.spec.ssm_index, shard));
        break;
      }
      case Family::kGraniteHybrid: {
        TANDEM_ASSIGN_OR_RETURN(layer.input_norm, w.Get(base + "input_layernorm.weight", {h}));
        TANDEM_RETURN_IF_ERROR(LoadMixer(w, base + "self_attn.", base + "mamba.", layer));
        TANDEM_ASSIGN_OR_RETURN(layer.ffn_norm,
                                w.Get(base + "post_attention_layernorm.weight", {h}));
        if (layer.spec.ffn == FfnKind::kMoe) {
          TANDEM_ASSIGN_OR_RETURN(
              layer.moe, MixtureOfExperts::LoadStacked(w, base + "block_sparse_moe.", c, shard));
        }
        TANDEM_ASSIGN_OR_RETURN(
            layer.shared_mlp,
            GatedMlp::LoadStacked(w, base + "shared_mlp.", c.hidden_size, c.shared_mlp_intermediate,
                                  c.ffn_activation, shard));
        break;
      }
      case Family::kNemotronH: {
        // One norm and one module per layer: a mixer, or (MixerKind::kNone) an MLP, which runs
        // as the layer's feed-forward part under the same norm.
        const std::string bp = absl::StrCat(root, "layers.", i, ".");
        const float* norm = nullptr;
        TANDEM_ASSIGN_OR_RETURN(norm, w.Get(bp + "norm.weight", {h}));
        if (layer.spec.ffn == FfnKind::kMoe) {
          layer.ffn_norm = norm;
          TANDEM_ASSIGN_OR_RETURN(layer.moe,
                                  MixtureOfExperts::LoadNemotronH(w, bp + "mixer.", c, shard));
          TANDEM_ASSIGN_OR_RETURN(
              layer.shared_expert,
              PlainMlp::Load(w, bp + "mixer.shared_experts.", c.hidden_size,
                             c.shared_mlp_intermediate, c.ffn_activation, c.ffn_bias, shard));
        } else if (layer.spec.mixer == MixerKind::kNone) {
          layer.ffn_norm = norm;
          TANDEM_ASSIGN_OR_RETURN(
              layer.plain_mlp, PlainMlp::Load(w, bp + "mixer.", c.hidden_size, c.intermediate_size,
                                              c.ffn_activation, c.ffn_bias, shard));
        } else {
          layer.input_norm = norm;
          TANDEM_RETURN_IF_ERROR(LoadMixer(w, bp + "mixer.", bp + "mixer.", layer));
        }
        break;
      }
    }
    layers_.push_back(std::move(layer));
  }

  // A tensor the graph did not read means the config and the checkpoint disagree (say, biases
  // the config does not declare). Zamba2 checkpoints may repeat tied shared-block tensors under
  // every hybrid layer; those copies are expected.
  std::vector<std::string> unused;
  for (const std::string& name : source_->UnusedTensors()) {
    if (c.family == Family::kZamba2 && name.find(".shared_transformer.") != std::string::npos) {
      continue;
    }
    if (c.tie_word_embeddings && name == "lm_head.weight") continue;
    // Worker 0 reads them (a missing or misshapen one fails its load, and so the group's).
    if (!computes_logits && (name == "lm_head.weight" || name == final_norm)) continue;
    // Nemotron 3's multi-token-prediction layers draft tokens for speculative decoding, which
    // tandem does not do; the model's own layers decode without them.
    if (c.family == Family::kNemotronH && name.starts_with("mtp.")) continue;
    unused.push_back(name);
  }
  if (!unused.empty()) {
    const size_t shown = std::min<size_t>(unused.size(), 5);
    return absl::InvalidArgumentError(
        absl::StrCat(dir_, ": ", unused.size(), " tensor(s) not used by the ", c.architecture,
                     " graph built from config.json, e.g. ",
                     absl::StrJoin(unused.begin(), unused.begin() + shown, ", ")));
  }
  progress("done");
  return absl::OkStatus();
}

absl::Status Model::LoadMixer(WeightStore& w, const std::string& attention_prefix,
                             const std::string& ssm_prefix, DecoderLayer& layer) const {
  const ModelConfig& c = config_;
  switch (layer.spec.mixer) {
    case MixerKind::kAttention: {
      TANDEM_ASSIGN_OR_RETURN(
          layer.attention,
          AttentionLayer::Load(w, attention_prefix, c.attention, c.hidden_size, shard_));
      break;
    }
    case MixerKind::kMamba1: {
      TANDEM_ASSIGN_OR_RETURN(layer.mamba1,
                              Mamba1Mixer::Load(w, ssm_prefix, c, layer.spec.ssm_index, shard_));
      break;
    }
    case MixerKind::kMamba2: {
      TANDEM_ASSIGN_OR_RETURN(layer.mamba2,
                              Mamba2Mixer::Load(w, ssm_prefix, c, layer.spec.ssm_index, shard_));
      break;
    }
    case MixerKind::kNone:
      break;
  }
  return absl::OkStatus();
}

size_t Model::weight_bytes() const {
  return group_ != nullptr ? group_->Total(&WeightStore::bytes) : weights_->bytes();
}

size_t Model::host_weight_bytes() const {
  return group_ != nullptr ? group_->Total(&WeightStore::host_bytes_held)
                           : weights_->host_bytes_held();
}

size_t Model::parameters() const {
  return group_ != nullptr ? group_->Total(&WeightStore::parameters) : weights_->parameters();
}

int64_t Model::LogitRows(std::span<const SequenceInput> batch) {
  int64_t rows = 0;
  for (const SequenceInput& in : batch) {
    rows += in.all_logits ? static_cast<int64_t>(in.tokens.size()) : 1;
  }
  return rows;
}

absl::Status Model::Validate(std::span<const SequenceInput> batch) const {
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    if (in.state == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no state"));
    }
    if (in.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no tokens to run"));
    }
    for (size_t t = 0; t < in.tokens.size(); ++t) {
      if (in.tokens[t] < 0 || in.tokens[t] >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s, ": token id ", in.tokens[t], " at index ", t,
                         " is outside the vocabulary [0, ", config_.vocab_size, ")"));
      }
    }
    const int64_t end = in.state->tokens + static_cast<int64_t>(in.tokens.size());
    if (config_.num_attention_layers > 0 &&
        static_cast<int64_t>(in.state->kv_pages.size()) < layout_.PagesFor(end)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sequence ", s, ": ", in.state->kv_pages.size(), " KV pages hold fewer than ", end,
          " positions (", layout_.PagesFor(end), " pages needed)"));
    }
    if (config_.num_ssm_layers > 0 && in.state->ssm == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("sequence ", s, ": no SSM block"));
    }
    int64_t previous = -1;
    for (const SsmSnapshot& snap : in.snapshots) {
      if (snap.after_tokens < 0 || snap.after_tokens > static_cast<int64_t>(in.tokens.size()) ||
          snap.after_tokens <= previous || snap.block == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", s, ": checkpoint after ", snap.after_tokens,
            " tokens is out of order, outside [0, ", in.tokens.size(), "] or has no block"));
      }
      previous = snap.after_tokens;
    }
  }
  return absl::OkStatus();
}

absl::Status Model::Forward(kernels::Ops& ops, kernels::Workspace& ws,
                            std::span<const SequenceInput> batch, float* logits,
                            const ForwardOptions& options) const {
  // The lead of a tensor-parallel group runs the whole group (models/tensor_parallel_group.h).
  if (group_ != nullptr && options.collectives == nullptr) {
    return group_->Forward(ops, ws, batch, logits, options);
  }
  if (logits != nullptr && final_norm_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor-parallel worker ", shard_.rank, " holds no LM head; worker 0 computes the logits"));
  }
  TANDEM_RETURN_IF_ERROR(Validate(batch));
  const kernels::Collectives* group = options.collectives;
  if (shard_.sharded() != (group != nullptr) ||
      (group != nullptr && (group->rank() != shard_.rank || group->ranks() != shard_.ranks))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a model holding tensor-parallel slice ", shard_.rank, " of ", shard_.ranks, " runs with ",
        group == nullptr ? "no collectives" : "the collectives of worker ",
        group == nullptr ? "" : absl::StrCat(group->rank(), " of ", group->ranks())));
  }
  ws.Reset();
  kernels::Workspace& host = options.host_scratch != nullptr ? *options.host_scratch : ws;
  if (&host != &ws) host.Reset();
  const int64_t h = config_.hidden_size, v = config_.vocab_size;

  Segment* segments = host.Array<Segment>(batch.size());
  int64_t rows = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const int64_t tokens = static_cast<int64_t>(batch[s].tokens.size());
    new (&segments[s])
        Segment{batch[s].state, rows, tokens, batch[s].state->tokens, batch[s].snapshots};
    rows += tokens;
  }
  const PassTables tables =
      BuildPassTables(ops, ws, host, batch, {segments, batch.size()}, rows,
                      layout_.num_attention_layers() > 0, config_.num_ssm_layers > 0);
  const ForwardContext ctx{ops,
                           ws,
                           host,
                           layout_,
                           {segments, batch.size()},
                           tables.ssm_blocks,
                           tables.sequences,
                           tables.row_page_tables,
                           tables.row_positions,
                           rows,
                           options.hydragen,
                           options.stats,
                           options.collectives};

  // One gather for the whole batch (on a GPU, one upload and one launch).
  int32_t* ids = host.Array<int32_t>(rows);
  for (size_t s = 0; s < batch.size(); ++s) {
    std::copy(batch[s].tokens.begin(), batch[s].tokens.end(), ids + segments[s].row);
  }
  float* hidden = ws.Floats(rows * h);
  ops.GatherRows(embed_, {ids, static_cast<size_t>(rows)}, hidden, h);
  if (config_.embedding_multiplier != 1.0f) {
    ops.ScaleRows(hidden, h, rows, h, config_.embedding_multiplier);
  }
  // Zamba2's shared blocks read the original embedding at every hybrid layer.
  float* embedding = nullptr;
  if (config_.family == Family::kZamba2) {
    embedding = ws.Floats(rows * h);
    ops.CopyRows(hidden, h, rows, h, embedding, h);
  }

  for (const DecoderLayer& layer : layers_) {
    const kernels::Workspace::Mark mark = ws.GetMark(), host_mark = host.GetMark();
    RunLayer(layer, ctx, hidden, embedding);
    ws.Rewind(mark);
    host.Rewind(host_mark);
  }

  for (size_t s = 0; s < batch.size(); ++s) batch[s].state->tokens += segments[s].tokens;
  if (logits == nullptr) return absl::OkStatus();

  // Final norm and LM head, only for the rows whose logits are wanted.
  const int64_t out_rows = LogitRows(batch);
  float* selected = ws.Floats(out_rows * h);
  // Runs of wanted rows that are consecutive in `hidden` (a decode batch is one) move as one copy.
  int64_t r = 0, run_from = 0, run_rows = 0;
  auto flush = [&] {
    if (run_rows > 0)
      ops.CopyRows(hidden + run_from * h, h, run_rows, h, selected + (r - run_rows) * h, h);
  };
  for (size_t s = 0; s < batch.size(); ++s) {
    const Segment& seg = segments[s];
    const int64_t first = batch[s].all_logits ? 0 : seg.tokens - 1;
    if (run_rows > 0 && run_from + run_rows != seg.row + first) {
      flush();
      run_rows = 0;
    }
    if (run_rows == 0) run_from = seg.row + first;
    run_rows += seg.tokens - first;
    r += seg.tokens - first;
  }
  flush();
  float* normed = ws.Floats(out_rows * h);
  ops.RmsNorm(selected, h, out_rows, h, final_norm_, config_.rms_norm_eps, normed, h);
  ops.Linear(normed, h, out_rows, lm_head_, nullptr, logits, v);
  if (config_.logits_scaling != 1.0f) {
    ops.DivideRows(logits, v, out_rows, v, config_.logits_scaling);
  }
  return absl::OkStatus();
}

void Model::RunLayer(const DecoderLayer& layer, const ForwardContext& ctx, float* hidden,
                     const float* embedding) const {
  kernels::Ops& ops = ctx.ops;
  const int64_t rows = ctx.rows, h = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  float* x = ctx.ws.Floats(rows * h);
  float* mixed = ctx.ws.Floats(rows * h);
  // hidden += residual_multiplier · delta (Granite scales each branch; 1 elsewhere).
  auto add_into_hidden = [&](float* delta) {
    if (config_.residual_multiplier != 1.0f) {
      ops.ScaleRows(delta, h, rows, h, config_.residual_multiplier);
    }
    ops.AddRows(delta, h, rows, h, hidden, h);
  };

  if (layer.spec.mixer == MixerKind::kNone) {
    // A feed-forward layer alone (Nemotron-H): only the second half below.
  } else if (layer.spec.zamba2_hybrid) {
    // h + linear(shared_block(h, e)) feeds the mixer's norm; the residual is h alone.
    float* shared = ctx.ws.Floats(rows * h);
    shared_blocks_[layer.spec.shared_block].Forward(ctx, hidden, embedding, layer.adapters,
                                                    layer.spec.attention_index, shared);
    ctx.AllReduce(shared, rows * h);
    float* projected = ctx.ws.Floats(rows * h);
    ops.Linear(shared, h, rows, layer.hybrid_linear, nullptr, projected, h);
    ops.AddRows(hidden, h, rows, h, projected, h);
    ops.RmsNorm(projected, h, rows, h, layer.input_norm, eps, x, h);
  } else {
    ops.RmsNorm(hidden, h, rows, h, layer.input_norm, eps, x, h);
  }

  if (layer.spec.mixer != MixerKind::kNone) {
    if (layer.attention) {
      layer.attention->Forward(ctx, x, nullptr, layer.spec.attention_index, mixed);
    } else if (layer.mamba1) {
      layer.mamba1->Forward(ctx, x, mixed);
    } else {
      layer.mamba2->Forward(ctx, x, mixed);
    }
    ctx.AllReduce(mixed, rows * h);
    add_into_hidden(mixed);
  }

  if (layer.ffn_norm != nullptr) {
    ops.RmsNorm(hidden, h, rows, h, layer.ffn_norm, eps, x, h);
    if (layer.moe && (layer.shared_mlp || layer.shared_expert)) {
      // Granite's experts beside its shared MLP, Nemotron 3's beside its shared expert: the
      // sum of the two. The shared part runs first: how much scratch the experts take depends
      // on the routing, and every buffer taken after them would move from step to step (a
      // device replays a step's launches only when their arguments stay put:
      // kernels/cuda/cuda_ops.h).
      float* shared = ctx.ws.Floats(rows * h);
      if (layer.shared_mlp) {
        layer.shared_mlp->Forward(ctx, x, shared);
      } else {
        layer.shared_expert->Forward(ctx, x, shared);
      }
      layer.moe->Forward(ctx, x, mixed);
      ops.AddRows(shared, h, rows, h, mixed, h);
    } else if (layer.shared_mlp) {
      layer.shared_mlp->Forward(ctx, x, mixed);
    } else if (layer.moe) {
      layer.moe->Forward(ctx, x, mixed);
    } else if (layer.plain_mlp) {
      layer.plain_mlp->Forward(ctx, x, mixed);
    } else {
      layer.mlp->Forward(ctx, x, mixed);
    }
    ctx.AllReduce(mixed, rows * h);
    add_into_hidden(mixed);
  }
}

}  // namespace tandem::models
