// Continuous batching at iteration level (docs/ARCHITECTURE.md, "Request path"). Each Step():
//   1. running sequences get their share of the step's token budget: decode tokens first, then
//      chunks of prefills in progress;
//   2. waiting sequences are admitted in arrival order while the budget, the running limit and
//      memory allow: admission looks the prompt up in the prefix cache, restores the usable
//      prefix (KV pages shared, SSM checkpoint copied), learns the checkpoint positions from
//      speculative insertion, and reserves KV pages for the whole remaining prompt;
//   3. one forward pass runs every scheduled token (ModelRunner), saving SSM states at the
//      checkpoint positions wherever they fall inside a chunk;
//   4. sequences whose new tokens reached their end sample a token; finished ones hand their
//      state to the prefix cache (Marconi admission: branch point + last token).
// When memory runs out: evict from the prefix cache (AVMP migrates capacity inside the
// allocator first), then preempt the most recently admitted sequence; it goes back to the
// head of the queue with its tokens and sampler state, and its state goes to the cache so
// that resuming costs little. Single-threaded: engine/Engine drives it from its loop thread.
#ifndef TANDEM_ENGINE_SCHEDULER_H_
#define TANDEM_ENGINE_SCHEDULER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cache/avmp_allocator.h"
#include "cache/block_allocator.h"
#include "cache/model_spec.h"
#include "engine/cache_binding.h"
#include "engine/detokenizer.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sequence.h"
#include "models/model.h"
#include "models/tokenizer.h"

namespace tandem::engine {

// Speculative decoding (engine/draft_tokens.h for where drafts come from). A decoding sequence
// with a draft runs its last sampled token and the draft in one pass, with logits after each,
// and keeps the longest prefix of the draft that sampling would have produced anyway: the output
// is the same, token for token, seeded sampling included, as without speculation. A model with
// SSM layers saves its state after each drafted token (SSM blocks borrowed for the step), since
// a recurrent state cannot drop the tokens it was not supposed to see.
struct SpeculationConfig {
  // The longest draft per step; 0 turns speculation off. Without prompt lookup only requests
  // that send a prediction speculate.
  int32_t draft_tokens = 4;
  // Draft from the sequence itself too: faster where the output repeats its text, a wasted
  // verification where a draft is wrong, so off unless asked for.
  bool prompt_lookup = false;
  int32_t min_match = 2;  // DraftOptions::min_match
  // Steps with more decoding sequences than this do not speculate: a large batch already
  // fills the hardware, and verifying drafts would only add work.
  int32_t max_batch = 8;
};

struct SchedulerConfig {
  int32_t max_running = 32;     // sequences in the batch at once
  int64_t step_tokens = 512;    // tokens per forward pass (decode rows + prefill chunks)
  int64_t prefill_chunk = 256;  // most prompt tokens one sequence runs per step
  int32_t max_new_tokens_limit = 4096;
  // Prompt tokens that requests with prompt logprobs may run per step, all of them together:
  // each needs its own row of logits (vocab floats), so this bounds that memory.
  int64_t prompt_logprob_rows = 256;
  CacheBindingConfig cache;
  SpeculationConfig speculation;
  // Bytes the prefix cache's pinned prefixes (Request::pin_prefix) may hold together; a pin
  // that would go over is refused. 0: no pins.
  size_t max_pinned_bytes = 0;
};

struct SchedulerStats {
  size_t running = 0;
  size_t waiting = 0;
  uint64_t steps = 0;
  uint64_t submitted = 0;
  uint64_t finished = 0;  // by any reason, including cancelled and failed
  uint64_t cancelled = 0;
  uint64_t failed = 0;
  uint64_t preemptions = 0;
  uint64_t prompt_tokens = 0;           // of admitted requests (first admission)
  uint64_t cached_tokens = 0;           // restored from the cache at first admission
  uint64_t hit_without_checkpoint = 0;  // matched in the tree beyond the deepest checkpoint
  uint64_t generated_tokens = 0;
  uint64_t prefill_tokens = 0;  // run through the model, including recomputation
  // Speculative decoding: tokens drafted and verified, and how many of them the model
  // confirmed (emitted without a pass of their own).
  uint64_t draft_tokens = 0;
  uint64_t accepted_draft_tokens = 0;
  // Finished or preempted sequences whose state the prefix cache refused (a broken invariant
  // between the scheduler and the tree; 0 in a correct engine).
  uint64_t cache_insert_errors = 0;
  int64_t hydragen_nodes = 0;  // shared-prefix nodes attended with Hydragen (all layers)
  // Steps whose forward pass a GPU replayed from a CUDA graph, and passes it captured into one
  // (--gpu-graphs; kernels::PassReplayCounts). 0 on the CPU.
  int64_t graph_replays = 0;
  int64_t graph_captures = 0;
  double token_hit_rate() const {
    return prompt_tokens ? static_cast<double>(cached_tokens) / prompt_tokens : 0.0;
  }
  // The fraction of the pools' capacity that sequences hold, the prefix cache's pages counted
  // as free because it gives them back on demand (a page a sequence shares with the cache
  // counts as the cache's), except what pinned prefixes hold, which it never gives back. It is
  // the "KV cache utilisation" load balancers compare replicas by: counting the cache would make
  // every warm replica look full.
  double memory_usage_ratio() const {
    size_t used = 0, capacity = 0;
    for (const cache::PoolStats& pool : memory.pools) {
      used += pool.used_units * pool.unit_bytes;
      capacity += pool.capacity_units * pool.unit_bytes;
    }
    const size_t evictable = cache.bytes - std::min(cache.bytes, cache.pinned_bytes);
    if (capacity == 0 || used <= evictable) return 0.0;
    return std::min(1.0, static_cast<double>(used - evictable) / capacity);
  }
  std::string cache_policy;
  double alpha = 0;
  size_t alpha_tunings = 0;
  cache::PrefixCacheStats cache;
  cache::AllocatorStats memory;
};

class Scheduler {
 public:
  // Everything passed must outlive the scheduler. `tokenizer` may be null: events then carry
  // token ids only and stop strings are refused.
  Scheduler(const models::Model& model, const models::Tokenizer* tokenizer,
            cache::BlockAllocator* allocator, const cache::ModelSpec& spec, ModelRunner* runner,
            const SchedulerConfig& config);
  ~Scheduler();

  // INVALID_ARGUMENT naming the field for a request the engine cannot run; RESOURCE_EXHAUSTED
  // for a prompt that can never fit in memory. Reads only immutable state: any thread may call
  // it.
  absl::Status Validate(const Request& request) const;
  // The memory one sequence of `tokens` holds: its KV pages and its SSM block.
  size_t StateBytes(int64_t tokens) const;
  // Queues a validated request. `first_choice`: the id of the first of several choices of the
  // same request (Engine::SubmitChoices), queued just before; this one then waits for it to
  // prefill the prompt for both (Sequence::waiting_choices).
  void Add(RequestId id, Request request, std::shared_ptr<RequestStream> stream,
           Clock::time_point submitted, RequestId first_choice = 0);
  // Finishes the request with FinishReason::kCancelled and frees everything it held; false if
  // it is unknown or already finished.
  bool Cancel(RequestId id);
  void CancelAll();
  // Releases a pinned prefix (Event::pinned_prefix); NOT_FOUND if it is not pinned.
  absl::Status UnpinPrefix(uint64_t pin);

  bool idle() const { return running_.empty() && waiting_.empty(); }
  // Where a queued or running request stands; nullopt once it has finished (or if unknown).
  std::optional<SequenceStatus> status_of(RequestId id) const;
  // One iteration: plan, run, sample, emit.
  void Step();

  SchedulerStats stats() const;
  CacheBinding* cache() { return cache_.get(); }

 private:
  // Moves a queued sequence into the batch: true when admitted. False with the sequence still
  // waiting when memory is short; false with it finished (kFinished) when it failed for another
  // reason, which its stream has been told.
  bool Admit(Sequence& seq);
  // Makes KV pages exist for `end` positions. May evict from the cache; when `may_preempt`,
  // may preempt running sequences (possibly `seq` itself). False if `seq` did not get them (it
  // was preempted or failed).
  bool ReserveKv(Sequence& seq, int64_t end, bool may_preempt);
  // Frees room in `pool` by evicting cached state; false if nothing could be evicted.
  bool EvictFor(cache::Pool pool, size_t units);
  void PlanSnapshots(Sequence& seq);
  // Prompt logprobs: the most prompt tokens `seq` may run this step with `rows_left` of the
  // step's prompt_logprob_rows unused (no limit: INT64_MAX).
  static int64_t PromptLogprobLimit(const Sequence& seq, int64_t rows_left);
  // Prompt logprobs: those of the prompt tokens this step's rows of sequence `i` predicted.
  void CollectPromptLogprobs(Sequence& seq, size_t i);
  void Preempt(Sequence& seq);
  void Finish(Sequence& seq, FinishReason reason, absl::Status error = absl::OkStatus(),
              std::string stop_string = {});
  // Returns the sequence's state to the cache (insert) or the allocator. The cache's refusal of
  // an insertion (a broken invariant; it still frees what it was given) is returned and counted.
  // With `pin` (a pin_prefix request's completion), the insertion also pins the sequence's
  // tokens and says how that went.
  [[nodiscard]] absl::Status ReleaseState(Sequence& seq, bool insert,
                                          absl::StatusOr<cache::PrefixCache::PinId>* pin = nullptr);
  // A pin just made, or refused (and released) when the pinned prefixes now hold more than
  // config_.max_pinned_bytes.
  absl::StatusOr<cache::PrefixCache::PinId> CheckPinnedBytes(
      absl::StatusOr<cache::PrefixCache::PinId> pin);
  // ReleaseState without insertion, which cannot fail.
  void DropState(Sequence& seq);
  // The sampler of rows drawn on the host (structured output, logit_bias).
  BatchSampler& HostSampler();
  // Structured output: the next token of `seq` from its row of logits, among those its
  // constraint allows (and accepted by it). Nothing when the text is complete and nothing may
  // follow; an error when no token can continue it.
  absl::StatusOr<std::optional<SampleResult>> SampleConstrained(Sequence& seq,
                                                                const float* logits);
  // The vocabulary trie structured output walks, built on first use.
  const std::shared_ptr<const TokenTrie>& token_trie();
  // Appends the sampled token, streams it, and finishes the sequence on a stop or its length.
  void Emit(Sequence& seq, const SampleResult& sample);
  // Samples the token of sequence `i`'s row `row` of this step's logits and emits it; false
  // when the sequence finished (on a stop, its length, or a failure of structured output).
  bool SampleAndEmit(Sequence& seq, size_t i, size_t row);

  // Speculative decoding (engine/scheduler_drafts.cc). PlanDrafts gives decoding sequences
  // drafts from the step's `budget` left after everything else, with memory that is free.
  void PlanDrafts(int64_t budget);
  // Sets a decoding sequence's draft for this step, of at most `room` tokens (empty: none).
  void ProposeDraftFor(Sequence& seq, int64_t room);
  // Reserves the draft's KV and borrows the SSM blocks its rewind may need, from free memory
  // only, shortening the draft to what it gets; then lays out the pass's input and snapshots.
  void BorrowDraftMemory(Sequence& seq);
  // Appends the rule of one kSample row drawn from `state`: its generator's next draw (which
  // advances it) and its penalty counts.
  void AppendSampleRule(SamplingState& state);
  // Appends the sampling rules of a drafting sequence's rows (one per input token).
  void AppendDraftRules(Sequence& seq);
  // After the pass and the draft's verification: takes the state back to the tokens the
  // sequence kept, returns the borrowed blocks and counts the draft. Safe to call on any
  // sequence (nothing to do without a draft in flight).
  absl::Status SettleDraft(Sequence& seq);
  // Choices of one prompt (engine/scheduler_choices.cc). LinkChoice makes `seq` wait for the
  // first choice `first` when that one can prefill the prompt for it.
  void LinkChoice(Sequence& seq, RequestId first);
  // The most prompt tokens `seq` may run before it must stop to fork (no limit: INT64_MAX).
  static int64_t ForkLimit(const Sequence& seq);
  // Lets the choices that wait for `first` run (in their places in the queue).
  void ReleaseChoices(Sequence& first);
  // A waiting choice that finishes (cancelled) stops counting in its first choice's
  // waiting_choices.
  void UnlinkChoice(Sequence& seq);
  // First choices that reached their prompt's last token hand their state to the prefix cache
  // and go back to the head of the queue, followed by the choices that waited for them.
  void ForkChoices();
  void RemoveFinished();
  // Tells an AVMP allocator the KV pages running sequences will still allocate, so that it does
  // not move capacity away that admitted requests are about to need.
  void UpdateReservedDemand();

  const models::Model& model_;
  const models::Tokenizer* tokenizer_;
  cache::BlockAllocator* allocator_;
  cache::AvmpAllocator* avmp_;  // allocator_ when it is AVMP, else null
  const size_t memory_budget_;
  ModelRunner* runner_;
  SchedulerConfig config_;
  std::unique_ptr<CacheBinding> cache_;

  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  uint64_t next_admission_ = 1;
  SchedulerStats stats_;
  std::shared_ptr<const DetokenizerVocab> vocab_;  // when there is a tokenizer

  // Reused per step.
  std::vector<Sequence*> scheduled_;
  std::vector<models::SequenceInput> inputs_;
  std::vector<absl::Status> errors_;
  std::vector<LogitsUse> logits_uses_;  // per scheduled sequence, what its step reads
  std::vector<kernels::SamplingRow> sampling_rules_;   // per logits row (read for kSample rows)
  std::vector<kernels::PenaltyToken> penalty_tokens_;  // what sampling_rules_ index
  // Structured output's: the vocabulary trie, a host sampler and the allowed tokens.
  std::shared_ptr<const TokenTrie> token_trie_;
  // Rows sampled on the host (structured output, logit_bias); sized on first use.
  std::optional<BatchSampler> host_sampler_;
  std::vector<int32_t> allowed_tokens_;
  std::vector<int32_t> end_tokens_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_SCHEDULER_H_
