// The engine API that the server builds on: Submit() returns a stream of events, Cancel() stops
// a request at any moment, stats() reports load, memory and the cache. Thread-safe. The
// scheduler runs on the engine's own loop thread, which never waits for a client: events go
// into each request's stream and are read at the client's pace.
#ifndef TANDEM_ENGINE_ENGINE_H_
#define TANDEM_ENGINE_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "cache/block_allocator.h"
#include "cache/model_spec.h"
#include "engine/compute_device.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/scheduler.h"
#include "kernels/ops.h"
#include "models/model.h"
#include "models/tokenizer.h"

namespace tandem::engine {

struct EngineConfig {
  SchedulerConfig scheduler;
  // Memory for KV pages and SSM blocks (running sequences and the prefix cache together).
  size_t memory_bytes = size_t{1} << 30;
  // avmp-dynamic[:R] | avmp-static:R | fixed-dual:R (cache/allocator_factory.h)
  std::string allocator = "avmp-dynamic";
  // Where the model runs and its KV pages and SSM blocks live; null = the CPU. Must outlive
  // the engine, and the model must have been loaded with its weight_placer().
  ComputeDevice* device = nullptr;
  int threads = 0;  // CPU compute threads; 0 = one per core
  // Batch-invariant kernels (ComputeOptions::batch_invariant) for the backend the engine creates
  // when given none, on the CPU or a GPU: a cache hit, a shared batch or a preemption then
  // leaves every logit bit-identical (up to Hydragen's LSE merge). Off trades that for faster
  // prefill (and, on a GPU, key splits for long-context decode).
  bool batch_invariant = true;
  // Prefill GEMMs on a GPU's tensor cores (ComputeOptions::tensor_core_matmul): faster, and no
  // longer the CPU's logits to 1e-3. For the backend the engine creates when given none.
  bool tensor_core_matmul = false;
  // Repeated passes replayed from CUDA graphs on a GPU (ComputeOptions::cuda_graphs).
  bool cuda_graphs = false;
  // Shared-prefix attention for decode rows restored from one cached prefix.
  models::HydragenConfig hydragen;
  size_t max_waiting = 1024;  // queued requests beyond which Submit refuses
  // After this many seconds without work following some, the loop returns the heap memory the
  // process freed to the OS (engine/heap_trim.h). 0 never does.
  double idle_trim_seconds = 1.0;
};

class Engine {
 public:
  // `model` and `tokenizer` (may be null) must outlive the engine. `ops` defaults to the
  // device's backend (the fast CPU one without a device).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const models::Model& model, const models::Tokenizer* tokenizer, const EngineConfig& config,
      std::unique_ptr<kernels::Ops> ops = nullptr);
  ~Engine();  // Shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // INVALID_ARGUMENT / RESOURCE_EXHAUSTED (see Scheduler::Validate; also a full queue),
  // UNAVAILABLE after Shutdown().
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(Request request);
  // `n` answers to one request (OpenAI's `n`), each a request of its own with its own stream
  // and id, in choice order. Choice i samples with ChoiceSeed(request.sampling.seed, i), so it
  // gives the output a lone request with that seed would. With a prefix cache, the prompt is
  // prefilled once for all of them (Sequence::waiting_choices). INVALID_ARGUMENT for n outside
  // [1, kMaxChoices]; the queue must have room for all n.
  absl::StatusOr<std::vector<std::shared_ptr<RequestStream>>> SubmitChoices(Request request,
                                                                            int32_t n);
  // Cancels a queued or running request; its stream ends with FinishReason::kCancelled. False
  // if the id is unknown or the request has already finished.
  bool Cancel(RequestId id);
  // Releases a prefix pinned by a Request::pin_prefix request (its Event::pinned_prefix) before
  // the next step: the cache may evict it from then on. An id not pinned is ignored.
  void UnpinPrefix(uint64_t pin);
  // Refuses new requests, cancels every queued and running one, and stops the loop thread.
  void Shutdown();
  // Refuses new requests and waits for the queued and running ones to finish.
  void Drain();

  // As of the end of the latest step.
  SchedulerStats stats() const;
  // Times the loop returned freed heap memory to the OS after going quiet.
  uint64_t heap_trims() const { return heap_trims_.load(std::memory_order_relaxed); }
  const models::Model& model() const { return model_; }
  const cache::ModelSpec& cache_spec() const { return spec_; }

 private:
  Engine(const models::Model& model, const EngineConfig& config) : model_(model), config_(config) {}
  void Loop();

  const models::Model& model_;
  EngineConfig config_;
  cache::ModelSpec spec_;
  std::unique_ptr<cache::BlockAllocator> allocator_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  struct Submission {
    RequestId id;
    Request request;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point submitted;
    RequestId first_choice = 0;  // SubmitChoices: the first choice's id, on the others
  };
  std::vector<Submission> inbox_;
  std::vector<RequestId> cancels_;
  std::vector<uint64_t> unpins_;
  absl::flat_hash_map<RequestId, std::weak_ptr<RequestStream>> live_;
  RequestId next_id_ = 1;
  bool accepting_ = true;
  bool stopping_ = false;
  bool loop_idle_ = true;
  bool trim_pending_ = false;  // loop thread only: a step ran since the last trim
  std::atomic<uint64_t> heap_trims_{0};
  SchedulerStats stats_;
  std::thread loop_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_ENGINE_H_
