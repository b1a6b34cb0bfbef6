#include "models/tensor_parallel_group.h"

#include <exception>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::models {

struct TensorParallelGroup::Peer {
  int32_t rank = 0;
  std::unique_ptr<Model> model;
  std::unique_ptr<kernels::Ops> ops;
  kernels::Workspace ws;
  std::thread thread;
  absl::Status status;
  std::exception_ptr thrown;  // what its pass threw, for the lead to rethrow
  // The batch as this worker sees it: the same sequences, its part of their units.
  std::vector<SequenceState> states;
  std::vector<std::vector<SsmSnapshot>> snapshots;
  std::vector<SequenceInput> inputs;
};

absl::StatusOr<std::unique_ptr<TensorParallelGroup>> TensorParallelGroup::Load(
    const std::string& dir, int32_t workers, const LoadOptions& options,
    const OpsFactory& make_ops) {
  return Create(
      workers, options, [&dir](const LoadOptions& slice) { return Model::Load(dir, slice); },
      make_ops);
}

absl::StatusOr<std::unique_ptr<TensorParallelGroup>> TensorParallelGroup::Create(
    int32_t workers, const LoadOptions& options, const SliceLoader& load_slice,
    const OpsFactory& make_ops) {
  if (workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallelism needs at least 1 worker, got ", workers));
  }
  if (options.placer != nullptr) {
    return absl::FailedPreconditionError(
        "tensor parallelism runs on the CPU only so far: its workers share host memory");
  }
  std::unique_ptr<TensorParallelGroup> group(new TensorParallelGroup());
  group->collectives_ = std::make_unique<kernels::HostCollectiveGroup>(workers);
  for (int32_t r = 0; r < workers; ++r) {
    LoadOptions slice = options;
    slice.shard = {r, workers};
    if (r > 0) slice.progress = nullptr;  // one progress report, the lead's
    absl::StatusOr<std::unique_ptr<Model>> model = load_slice(slice);
    if (!model.ok()) return model.status();
    if (r == 0) {
      group->lead_ = *std::move(model);
      continue;
    }
    auto peer = std::make_unique<Peer>();
    peer->rank = r;
    peer->model = *std::move(model);
    peer->ops = make_ops(r);
    if (peer->ops == nullptr || !peer->ops->activations_on_host()) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor-parallel worker ", r, " needs a host backend"));
    }
    group->peers_.push_back(std::move(peer));
  }
  // One worker is the whole model: nothing to run beside it.
  if (workers > 1) group->lead_->group_ = group.get();
  for (auto& peer : group->peers_) {
    Peer* p = peer.get();
    p->thread = std::thread([g = group.get(), p] { g->PeerLoop(*p); });
  }
  return group;
}

TensorParallelGroup::~TensorParallelGroup() {
  std::lock_guard<std::mutex> no_pass(pass_mu_);  // a pass under way finishes first
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (auto& peer : peers_) {
    if (peer->thread.joinable()) peer->thread.join();
  }
  if (lead_ != nullptr) lead_->group_ = nullptr;
}

size_t TensorParallelGroup::Total(size_t (WeightStore::*count)() const) const {
  size_t total = (*lead_->weights_.*count)();
  for (const auto& peer : peers_) total += (*peer->model->weights_.*count)();
  return total;
}

void TensorParallelGroup::PeerLoop(Peer& peer) {
  peer.ops->BindCallingThread();
  uint64_t seen = 0;
  for (;;) {
    ForwardOptions options;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return stopping_ || pass_ != seen; });
      if (stopping_) return;
      seen = pass_;
      options = *options_;
    }
    options.stats = nullptr;  // the lead counts
    options.host_scratch = nullptr;
    options.collectives = &collectives_->member(peer.rank);
    absl::Status status;
    std::exception_ptr thrown;
    try {
      status = peer.model->Forward(*peer.ops, peer.ws, peer.inputs, nullptr, options);
    } catch (...) {
      // Handed to the lead's thread, which throws it as its own Forward would.
      thrown = std::current_exception();
    }
    // A worker that stopped early must not leave the others waiting for its sums.
    if (thrown != nullptr || !status.ok()) collectives_->Abort();
    {
      std::lock_guard<std::mutex> lock(mu_);
      peer.status = std::move(status);
      peer.thrown = thrown;
      ++finished_;
    }
    done_.notify_all();
  }
}

void TensorParallelGroup::Translate(Peer& peer, std::span<const SequenceInput> batch) {
  // Its part of every unit: the units hold the workers' parts one after another.
  const StateLayout& layout = peer.model->layout();
  const int64_t kv_offset = peer.rank * layout.worker_kv_page_floats();
  const int64_t ssm_offset = peer.rank * layout.worker_ssm_block_floats();
  const size_t n = batch.size();
  peer.states.resize(n);
  peer.snapshots.resize(n);
  peer.inputs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const SequenceInput& in = batch[i];
    SequenceState& state = peer.states[i];
    state.tokens = in.state != nullptr ? in.state->tokens : 0;
    state.kv_pages.clear();
    state.ssm = nullptr;
    if (in.state != nullptr) {
      for (float* page : in.state->kv_pages) {
        state.kv_pages.push_back(page != nullptr ? page + kv_offset : nullptr);
      }
      if (in.state->ssm != nullptr) state.ssm = in.state->ssm + ssm_offset;
    }
    std::vector<SsmSnapshot>& snapshots = peer.snapshots[i];
    snapshots.assign(in.snapshots.begin(), in.snapshots.end());
    for (SsmSnapshot& s : snapshots) {
      if (s.block != nullptr) s.block += ssm_offset;
    }
    peer.inputs[i] = {in.state != nullptr ? &state : nullptr, in.tokens, snapshots, in.all_logits};
  }
}

absl::Status TensorParallelGroup::Forward(kernels::Ops& ops, kernels::Workspace& ws,
                                          std::span<const SequenceInput> batch, float* logits,
                                          const ForwardOptions& options) {
  if (!ops.activations_on_host()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tensor parallelism runs on host backends only, not ", std::string(ops.name())));
  }
  // One pass at a time: a whole model's Forward may be called from several threads at once.
  std::lock_guard<std::mutex> one_pass(pass_mu_);
  // Each worker's view of the batch, made here while they are idle: it may throw (no memory),
  // and nothing has run yet.
  for (auto& peer : peers_) Translate(*peer, batch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    options_ = &options;
    finished_ = 0;
    ++pass_;
  }
  work_.notify_all();
  ForwardOptions lead_options = options;
  lead_options.collectives = &collectives_->member(0);
  absl::Status lead;
  std::exception_ptr thrown;
  try {
    lead = lead_->Forward(ops, ws, batch, logits, lead_options);
  } catch (...) {
    thrown = std::current_exception();
  }
  if (thrown != nullptr || !lead.ok()) collectives_->Abort();
  absl::Status peers;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return finished_ == static_cast<int32_t>(peers_.size()); });
    for (const auto& peer : peers_) {
      if (thrown == nullptr && peer->thrown != nullptr) thrown = peer->thrown;
      if (peers.ok() && !peer->status.ok()) peers = peer->status;
    }
  }
  collectives_->Reset();
  // A worker that threw (out of scratch memory, say) failed the pass partway, as the lead's
  // own exception would: the caller's handler for it treats the states as lost.
  if (thrown != nullptr) std::rethrow_exception(thrown);
  // Every worker validates the same batch before it changes anything: the lead's refusal is
  // theirs too.
  if (!lead.ok()) return lead;
  if (!peers.ok()) {
    // Cannot happen (the workers validate what the lead validated), and the lead's states have
    // advanced: say so rather than pretend nothing changed.
    return absl::InternalError(
        absl::StrCat("tensor-parallel worker refused a batch the lead ran; its states are lost: ",
                     peers.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& dir, const LoadOptions& options, int32_t workers,
    const TensorParallelGroup::OpsFactory& make_ops) {
  return LoadModel([&dir](const LoadOptions& slice) { return Model::Load(dir, slice); }, options,
                   workers, make_ops);
}

absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const TensorParallelGroup::SliceLoader& load_slice, const LoadOptions& options, int32_t workers,
    const TensorParallelGroup::OpsFactory& make_ops) {
  if (workers == 1) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load_slice(options));
    return std::shared_ptr<const Model>(std::move(model));
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelGroup> group,
                          TensorParallelGroup::Create(workers, options, load_slice, make_ops));
  std::shared_ptr<TensorParallelGroup> owner(std::move(group));
  return std::shared_ptr<const Model>(owner, &owner->lead());
}

}  // namespace tandem::models
