#include "engine/engine.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/allocator_factory.h"
#include "engine/cache_model_spec.h"
#include "engine/draft_tokens.h"
#include "engine/heap_trim.h"
#include "kernels/backends.h"
#include "models/status_macros.h"

namespace tandem::engine {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const models::Model& model,
                                                       const models::Tokenizer* tokenizer,
                                                       const EngineConfig& config,
                                                       std::unique_ptr<kernels::Ops> ops) {
  if (config.allocator.rfind("padded-unified", 0) == 0) {
    return absl::InvalidArgumentError(
        "allocator: padded-unified changes the page size and exists only in simulations; use "
        "avmp-dynamic, avmp-static:R or fixed-dual:R");
  }
  if (config.scheduler.max_running < 1 || config.scheduler.step_tokens < 1 ||
      config.scheduler.prefill_chunk < 1 || config.scheduler.prompt_logprob_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduler: max_running, step_tokens, prefill_chunk and prompt_logprob_rows must be "
        "positive, got ",
        config.scheduler.max_running, ", ", config.scheduler.step_tokens, ", ",
        config.scheduler.prefill_chunk, ", ", config.scheduler.prompt_logprob_rows));
  }
  const SpeculationConfig& spec = config.scheduler.speculation;
  const int32_t longest_match = DraftOptions().max_match;
  if (spec.draft_tokens < 0 || spec.min_match < 1 || spec.min_match > longest_match ||
      spec.max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculation: draft_tokens must be >= 0, min_match in [1, ", longest_match,
                     "] and max_batch >= 1, got ", spec.draft_tokens, ", ", spec.min_match, ", ",
                     spec.max_batch));
  }
  std::unique_ptr<Engine> engine(new Engine(model, config));
  TANDEM_ASSIGN_OR_RETURN(engine->spec_, CacheModelSpecFor(model.config(), model.dir()));
  cache::AllocatorOptions options;
  options.budget_bytes = config.memory_bytes;
  options.page_tokens = static_cast<size_t>(model.layout().page_tokens());
  if (model.shard().sharded()) {
    // Every worker's part of each unit (models/state_layout.h).
    options.kv_page_bytes = model.layout().kv_page_bytes();
    options.ssm_block_bytes = model.layout().ssm_block_bytes();
  }
  options.backing = cache::BackingKind::kHost;
  if (config.device != nullptr && !config.device->on_host()) {
    options.make_backing = [device = config.device](size_t bytes) {
      return device->CreateStateBacking(bytes);
    };
  }
  TANDEM_ASSIGN_OR_RETURN(cache::NamedAllocator named,
                          cache::CreateAllocator(config.allocator, engine->spec_, options));
  const bool kv = model.config().num_attention_layers > 0;
  const bool ssm = model.config().num_ssm_layers > 0;
  if ((kv && named.allocator->unit_bytes(cache::Pool::kKvPage) != model.layout().kv_page_bytes()) ||
      (ssm &&
       named.allocator->unit_bytes(cache::Pool::kSsmBlock) != model.layout().ssm_block_bytes())) {
    return absl::InternalError(absl::StrCat(
        "allocator units (", named.allocator->unit_bytes(cache::Pool::kKvPage), ", ",
        named.allocator->unit_bytes(cache::Pool::kSsmBlock), " bytes) differ from the model's (",
        model.layout().kv_page_bytes(), ", ", model.layout().ssm_block_bytes(), ")"));
  }
  engine->allocator_ = std::move(named.allocator);
  if (ops == nullptr) {
    const ComputeOptions compute{config.threads, config.batch_invariant, config.tensor_core_matmul,
                                 config.cuda_graphs};
    if (config.device != nullptr) {
      TANDEM_ASSIGN_OR_RETURN(ops, config.device->CreateOps(compute));
    } else {
      ops = kernels::MakeCpuOps(compute.threads, compute.batch_invariant);
    }
  }
  TANDEM_RETURN_IF_ERROR(CheckWeightsReachable(model, *ops));
  engine->runner_ = std::make_unique<ModelRunner>(model, std::move(ops), config.hydragen);
  engine->scheduler_ =
      std::make_unique<Scheduler>(model, tokenizer, engine->allocator_.get(), engine->spec_,
                                  engine->runner_.get(), config.scheduler);
  engine->stats_ = engine->scheduler_->stats();
  engine->loop_ = std::thread([e = engine.get()] { e->Loop(); });
  return engine;
}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(Request request) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<RequestStream>> streams,
                          SubmitChoices(std::move(request), 1));
  return std::move(streams.front());
}

absl::StatusOr<std::vector<std::shared_ptr<RequestStream>>> Engine::SubmitChoices(Request request,
                                                                                  int32_t n) {
  if (n < 1 || n > kMaxChoices) {
    return absl::InvalidArgumentError(
        absl::StrCat("n: the number of choices must be in [1, ", kMaxChoices, "], got ", n));
  }
  if (request.pin_prefix && n != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("n: a request that pins its prompt has one choice, got ", n));
  }
  TANDEM_RETURN_IF_ERROR(scheduler_->Validate(request));
  std::vector<std::shared_ptr<RequestStream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) return absl::UnavailableError("the engine is shutting down");
    if (stats_.waiting + inbox_.size() + static_cast<size_t>(n) > config_.max_waiting) {
      return absl::ResourceExhaustedError(
          n == 1 ? absl::StrCat("the queue is full (", config_.max_waiting, " waiting requests)")
                 : absl::StrCat("the queue has no room for ", n, " choices (at most ",
                                config_.max_waiting, " waiting requests)"));
    }
    const Clock::time_point now = Clock::now();
    const RequestId first = next_id_;
    for (int32_t i = 0; i < n; ++i) {
      const RequestId id = next_id_++;
      Request choice = i + 1 < n ? request : std::move(request);
      choice.sampling.seed = ChoiceSeed(choice.sampling.seed, i);
      streams.push_back(std::make_shared<RequestStream>(id));
      inbox_.push_back({id, std::move(choice), streams.back(), now, i > 0 ? first : 0});
      live_[id] = streams.back();
    }
    loop_idle_ = false;
  }
  wake_.notify_one();
  return streams;
}

bool Engine::Cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return false;
    std::shared_ptr<RequestStream> stream = it->second.lock();
    if (stream == nullptr || stream->finished()) return false;
    cancels_.push_back(id);
  }
  wake_.notify_one();
  return true;
}

void Engine::UnpinPrefix(uint64_t pin) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    unpins_.push_back(pin);
  }
  wake_.notify_one();
}

void Engine::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  accepting_ = false;
  idle_.wait(lock, [&] { return loop_idle_ || stopping_; });
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    stopping_ = true;
  }
  wake_.notify_one();
  if (loop_.joinable()) loop_.join();
}

SchedulerStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Engine::Loop() {
  runner_->ops().BindCallingThread();
  std::vector<Submission> inbox;
  std::vector<RequestId> cancels;
  std::vector<uint64_t> unpins;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (scheduler_->idle() && inbox_.empty() && cancels_.empty() && unpins_.empty() &&
          !stopping_) {
        loop_idle_ = true;
        idle_.notify_all();
        auto woken = [&] {
          return !inbox_.empty() || !cancels_.empty() || !unpins_.empty() || stopping_;
        };
        if (trim_pending_ && config_.idle_trim_seconds > 0 &&
            !wake_.wait_for(lock, std::chrono::duration<double>(config_.idle_trim_seconds),
                            woken)) {
          // Quiet for a while after some work: hand what the heap freed back to the OS, once
          // per quiet period (never between closely spaced requests; engine/heap_trim.h).
          trim_pending_ = false;
          lock.unlock();
          ReturnFreeHeapToOs();
          heap_trims_.fetch_add(1, std::memory_order_relaxed);
          lock.lock();
        }
        wake_.wait(lock, woken);
      }
      if (stopping_) break;
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      unpins.swap(unpins_);
      loop_idle_ = false;
    }
    for (Submission& s : inbox) {
      scheduler_->Add(s.id, std::move(s.request), std::move(s.stream), s.submitted, s.first_choice);
    }
    inbox.clear();
    for (RequestId id : cancels) scheduler_->Cancel(id);
    cancels.clear();
    // An id already released (or never pinned) has nothing left to release.
    for (uint64_t pin : unpins) scheduler_->UnpinPrefix(pin).IgnoreError();
    unpins.clear();

    scheduler_->Step();
    trim_pending_ = true;

    SchedulerStats stats = scheduler_->stats();
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = std::move(stats);
    for (auto it = live_.begin(); it != live_.end();) {
      std::shared_ptr<RequestStream> stream = it->second.lock();
      if (stream == nullptr || stream->finished()) {
        live_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  // Shutting down: everything still queued or running ends as cancelled.
  std::vector<Submission> leftover;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leftover.swap(inbox_);
  }
  for (Submission& s : leftover) {
    scheduler_->Add(s.id, std::move(s.request), std::move(s.stream), s.submitted, s.first_choice);
  }
  scheduler_->CancelAll();
  if (scheduler_->cache() != nullptr) scheduler_->cache()->WaitForTuner();
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = scheduler_->stats();
  loop_idle_ = true;
  idle_.notify_all();
}

}  // namespace tandem::engine
