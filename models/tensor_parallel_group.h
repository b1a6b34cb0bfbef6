// A model split over several workers of this process (models/tensor_parallel.h), run as if it
// were one: the group loads every worker's slice, and its lead (worker 0's slice) is what callers
// run. Each Forward of the lead runs the same batch on the other workers at the same time, on
// threads of their own, each with its own backend and scratch, on its part of the same KV pages
// and SSM blocks (a unit holds every worker's part: StateLayout), and they add their partial
// sums through host collectives. Whoever drives a whole model (the engine's ModelRunner,
// engine::Generate, the benchmarks) drives the lead unchanged.
//
// The workers share the host's memory, so this is the CPU's tensor parallelism; GPUs will need
// one device per worker and collectives between devices (NCCL), not built yet.
#ifndef TANDEM_MODELS_TENSOR_PARALLEL_GROUP_H_
#define TANDEM_MODELS_TENSOR_PARALLEL_GROUP_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/host_collectives.h"
#include "kernels/ops.h"
#include "kernels/workspace.h"
#include "models/model.h"

namespace tandem::models {

class TensorParallelGroup {
 public:
  // A backend for one worker (worker 0's is the caller's own, passed to each Forward).
  using OpsFactory = std::function<std::unique_ptr<kernels::Ops>(int32_t worker)>;

  // Loads `workers` slices of DIR (ShardConfig's errors when the model does not split that way)
  // and starts a thread for each worker but the lead. Host memory only: options.placer must be
  // null.
  static absl::StatusOr<std::unique_ptr<TensorParallelGroup>> Load(const std::string& dir,
                                                                   int32_t workers,
                                                                   const LoadOptions& options,
                                                                   const OpsFactory& make_ops);
  // The same with each slice made by `load_slice` (given options.shard set to the slice), e.g.
  // a random-weight model for benchmarks.
  using SliceLoader =
      std::function<absl::StatusOr<std::unique_ptr<Model>>(const LoadOptions& slice)>;
  static absl::StatusOr<std::unique_ptr<TensorParallelGroup>> Create(int32_t workers,
                                                                     const LoadOptions& options,
                                                                     const SliceLoader& load_slice,
                                                                     const OpsFactory& make_ops);
  ~TensorParallelGroup();  // stops the threads; the lead must no longer run
  TensorParallelGroup(const TensorParallelGroup&) = delete;
  TensorParallelGroup& operator=(const TensorParallelGroup&) = delete;

  // The model callers run: worker 0's slice, which reports the whole model's config.
  const Model& lead() const { return *lead_; }
  int32_t workers() const { return static_cast<int32_t>(peers_.size()) + 1; }
  // A weight store's count (bytes, parameters) over every worker's slice.
  size_t Total(size_t (WeightStore::*count)() const) const;

 private:
  friend class Model;  // the lead's Forward runs the group's

  struct Peer;
  TensorParallelGroup() = default;
  // The lead's Forward: worker 0 on the calling thread with `ops` and `ws`, the others beside it.
  absl::Status Forward(kernels::Ops& ops, kernels::Workspace& ws,
                       std::span<const SequenceInput> batch, float* logits,
                       const ForwardOptions& options);
  void PeerLoop(Peer& peer);
  // `peer`'s view of the batch: the same sequences, its part of each of their units.
  static void Translate(Peer& peer, std::span<const SequenceInput> batch);

  std::unique_ptr<Model> lead_;
  std::unique_ptr<kernels::HostCollectiveGroup> collectives_;
  std::vector<std::unique_ptr<Peer>> peers_;

  std::mutex pass_mu_;  // held through each pass
  // The pass handed to every peer.
  std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable done_;
  uint64_t pass_ = 0;  // the latest pass handed out
  int32_t finished_ = 0;
  bool stopping_ = false;
  const ForwardOptions* options_ = nullptr;
};

// DIR loaded whole (workers 1: `make_ops` unused) or split over `workers` threads, whose group
// the returned pointer keeps alive.
absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& dir, const LoadOptions& options, int32_t workers = 1,
    const TensorParallelGroup::OpsFactory& make_ops = {});
// The same for any loader (whole: `load_slice(options)`).
absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const TensorParallelGroup::SliceLoader& load_slice, const LoadOptions& options,
    int32_t workers = 1, const TensorParallelGroup::OpsFactory& make_ops = {});

}  // namespace tandem::models

#endif  // TANDEM_MODELS_TENSOR_PARALLEL_GROUP_H_
