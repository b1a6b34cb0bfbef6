#include "engine/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint_hints.h"
#include "engine/reasoning_tokens.h"

namespace tandem::engine {
Scheduler::Scheduler(const models::Model& model, const models::Tokenizer* tokenizer,
                     cache::BlockAllocator* allocator, const cache::ModelSpec& spec,
                     ModelRunner* runner, const SchedulerConfig& config)
    : model_(model),
      tokenizer_(tokenizer),
      allocator_(allocator),
      avmp_(dynamic_cast<cache::AvmpAllocator*>(allocator)),
      memory_budget_(allocator->allocator_stats().budget_bytes),
      runner_(runner),
      config_(config),
      cache_(CacheBinding::Create(config.cache, model, spec, allocator)) {
  if (tokenizer_ != nullptr) vocab_ = std::make_shared<DetokenizerVocab>(*tokenizer_);
  stats_.cache_policy = CachePolicyName(config.cache.policy);
}

Scheduler::~Scheduler() { CancelAll(); }

absl::Status Scheduler::Validate(const Request& r) const {
  if (r.prompt.empty()) return absl::InvalidArgumentError("prompt: no tokens");
  const int32_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("prompt[", i, "]: token id ", r.prompt[i],
                                                     " is outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
  }
  if (r.prompt_logprobs && (*r.prompt_logprobs < 0 || *r.prompt_logprobs > SampleResult::kMaxTop)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt_logprobs: must be in [0, ", SampleResult::kMaxTop, "], got ", *r.prompt_logprobs));
  }
  if (r.pin_prefix) {
    // The messages speak of pinning, not of the field: the server's PinPrefix call, which sets
    // it, has no field of that name.
    if (cache_ == nullptr) {
      return absl::FailedPreconditionError(
          "pinning a prefix needs a prefix cache, and this engine has none");
    }
    if (config_.max_pinned_bytes == 0) {
      return absl::FailedPreconditionError("pinning prefixes is off (no memory is allowed for it)");
    }
    if (r.max_new_tokens != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_new_tokens: must be 0 for a request that pins its prompt, got ", r.max_new_tokens));
    }
    if (r.prompt_logprobs) {
      return absl::InvalidArgumentError(
          "prompt_logprobs: not allowed for a request that pins its prompt");
    }
    // What the prefix alone will hold, so that one that can never fit costs no prefill.
    const size_t held = StateBytes(static_cast<int64_t>(r.prompt.size()));
    if (held > config_.max_pinned_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "prompt: ", r.prompt.size(), " tokens would hold ", held, " bytes pinned, more than the ",
          config_.max_pinned_bytes, " allowed for pinned prefixes"));
    }
  }
  // A request that only scores or pins its prompt may generate nothing.
  const int32_t min_new_tokens = r.prompt_logprobs || r.pin_prefix ? 0 : 1;
  if (r.max_new_tokens < min_new_tokens || r.max_new_tokens > config_.max_new_tokens_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens: must be in [", min_new_tokens, ", ", config_.max_new_tokens_limit,
        "], got ", r.max_new_tokens, min_new_tokens == 1 ? " (0 only with prompt logprobs)" : ""));
  }
  if (absl::Status s = ValidateSamplingParams(r.sampling); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: ", s.message()));
  }
  for (size_t i = 0; i < r.stop_token_ids.size(); ++i) {
    if (r.stop_token_ids[i] < 0 || r.stop_token_ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop_token_ids[", i, "]: token id ", r.stop_token_ids[i], " is outside the vocabulary"));
    }
  }
  for (const auto& [token, bias] : r.sampling.logit_bias) {
    if (token >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampling: logit_bias: token id ", token, " is outside the vocabulary"));
    }
  }
  if (r.prediction.size() > kMaxPredictionTokens) {
    return absl::InvalidArgumentError(absl::StrCat("prediction: at most ", kMaxPredictionTokens,
                                                   " tokens, got ", r.prediction.size()));
  }
  for (size_t i = 0; i < r.prediction.size(); ++i) {
    if (r.prediction[i] < 0 || r.prediction[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("prediction[", i, "]: token id ", r.prediction[i],
                       " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  for (size_t i = 0; i < r.shown_special_tokens.size(); ++i) {
    const int32_t id = r.shown_special_tokens[i];
    // The tokenizer's ids: a marker may be one the model has no logit for (then never sampled).
    if (id < 0 || id >= (tokenizer_ != nullptr ? tokenizer_->vocab_size() : vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("shown_special_tokens[", i, "]: token id ",
                                                     id, " is outside the vocabulary"));
    }
  }
  if (r.grammar != nullptr) {
    if (tokenizer_ == nullptr) {
      return absl::InvalidArgumentError(
          "response format: the engine has no tokenizer to match the output against the grammar");
    }
    if (absl::Status s = GrammarMatcher::Create(r.grammar).status(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("response format: ", s.message()));
    }
  }
  if (!r.stop_strings.empty() && tokenizer_ == nullptr) {
    return absl::InvalidArgumentError("stop_strings: the engine has no tokenizer to match text");
  }
  if (absl::Status s = ValidateStopStrings(r.stop_strings); !s.ok()) return s;
  if (absl::Status s = ValidateCheckpointHints(r.checkpoint_hints, r.prompt.size()); !s.ok()) {
    return s;
  }
  // A sequence must fit alone: its KV pages plus its own SSM block (checkpoints are optional).
  if (model_.config().num_attention_layers > 0) {
    const int64_t tokens = static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
    if (StateBytes(tokens) > memory_budget_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "prompt: ", r.prompt.size(), " tokens plus max_new_tokens ", r.max_new_tokens, " need ",
          model_.layout().PagesFor(tokens), " KV pages, more than the engine's memory (",
          memory_budget_, " bytes) can ever hold"));
    }
  }
  return absl::OkStatus();
}

size_t Scheduler::StateBytes(int64_t tokens) const {
  const size_t kv =
      model_.config().num_attention_layers > 0
          ? static_cast<size_t>(model_.layout().PagesFor(tokens)) * model_.layout().kv_page_bytes()
          : 0;
  return kv + (model_.config().num_ssm_layers > 0 ? model_.layout().ssm_block_bytes() : 0);
}

void Scheduler::Add(RequestId id, Request request, std::shared_ptr<RequestStream> stream,
                    Clock::time_point submitted, RequestId first_choice) {
  ++stats_.submitted;
  auto seq = std::make_unique<Sequence>(id, std::move(request), std::move(stream), submitted);
  if (vocab_ != nullptr) {
    seq->text.emplace(vocab_, seq->request.skip_special_tokens, seq->request.prompt,
                      seq->request.stop_strings, seq->request.shown_special_tokens);
  }
  if (seq->request.grammar != nullptr) {
    std::vector<MarkupToken> markup;
    for (const int32_t id : seq->request.shown_special_tokens) {
      if (id < model_.config().vocab_size) markup.push_back({id, tokenizer_->TokenBytes(id)});
    }
    absl::StatusOr<OutputConstraint> constraint =
        OutputConstraint::Create(seq->request.grammar, token_trie(), std::move(markup));
    if (!constraint.ok()) {
      Finish(*seq, FinishReason::kError, constraint.status());
      return;
    }
    seq->constraint.emplace(*std::move(constraint));
  }
  if (first_choice != 0) LinkChoice(*seq, first_choice);
  waiting_.push_back(std::move(seq));
}

std::optional<SequenceStatus> Scheduler::status_of(RequestId id) const {
  for (const auto& seq : waiting_) {
    if (seq->id == id) return seq->status;
  }
  for (const auto& seq : running_) {
    if (seq && seq->id == id && seq->status != SequenceStatus::kFinished) return seq->status;
  }
  return std::nullopt;
}

bool Scheduler::Cancel(RequestId id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      std::unique_ptr<Sequence> seq = std::move(*it);
      waiting_.erase(it);
      Finish(*seq, FinishReason::kCancelled);
      return true;
    }
  }
  for (auto& seq : running_) {
    if (seq && seq->id == id) {
      Finish(*seq, FinishReason::kCancelled);
      RemoveFinished();
      return true;
    }
  }
  return false;
}

void Scheduler::CancelAll() {
  while (!waiting_.empty()) {
    std::unique_ptr<Sequence> seq = std::move(waiting_.front());
    waiting_.pop_front();
    Finish(*seq, FinishReason::kCancelled);
  }
  for (auto& seq : running_) {
    if (seq) Finish(*seq, FinishReason::kCancelled);
  }
  RemoveFinished();
}

bool Scheduler::EvictFor(cache::Pool pool, size_t units) {
  return cache_ != nullptr && cache_->Evict(pool, units) > 0;
}

absl::Status Scheduler::ReleaseState(Sequence& seq, bool insert,
                                     absl::StatusOr<cache::PrefixCache::PinId>* pin) {
  if (pin != nullptr) *pin = absl::InternalError("the sequence had no state to pin");
  // A sequence that finishes inside a draft's verification has run tokens it did not keep.
  if (!SettleDraft(seq).ok()) insert = false;  // its state cannot be trusted
  absl::Status inserted;
  if (seq.lease.has_value()) {
    if (insert && seq.memory) {
      inserted = cache_->Insert(*seq.lease, seq.tokens, *seq.memory, seq.saved, pin);
      if (!inserted.ok()) ++stats_.cache_insert_errors;
    } else {
      cache_->Abort(*seq.lease);
    }
    seq.lease.reset();
  }
  seq.saved.clear();  // frees what the cache did not take
  seq.memory.reset();
  seq.checkpoint_positions.clear();
  seq.step_snapshots.clear();
  return inserted;
}

void Scheduler::DropState(Sequence& seq) {
  // Without insertion nothing can be refused.
  ReleaseState(seq, /*insert=*/false).IgnoreError();
}

void Scheduler::Finish(Sequence& seq, FinishReason reason, absl::Status error,
                       std::string stop_string) {
  const bool completed = reason == FinishReason::kLength || reason == FinishReason::kStop;
  std::string tail;
  if (completed && seq.text) {
    if (seq.text->Finish(&tail)) {
      reason = FinishReason::kStop;
      stop_string = seq.text->matched_stop();
    }
  }
  const bool pins = completed && seq.request.pin_prefix;
  absl::StatusOr<cache::PrefixCache::PinId> pin;
  if (absl::Status inserted = ReleaseState(seq, /*insert=*/completed, pins ? &pin : nullptr);
      !inserted.ok()) {
    // The output is complete, but the cache refused the state it produced: a broken invariant
    // between the scheduler and the tree. Say so on this request rather than hide it; the tree
    // freed what it was given, so nothing leaks and no other request is affected.
    reason = FinishReason::kError;
    error = absl::InternalError(absl::StrCat(
        "prefix cache: the finished sequence's state was refused: ", inserted.message()));
  } else if (pins) {
    pin = CheckPinnedBytes(std::move(pin));
    if (!pin.ok()) {
      reason = FinishReason::kError;
      error = absl::Status(pin.status().code(),
                           absl::StrCat("the prefix was not pinned: ", pin.status().message()));
    }
  }
  seq.status = SequenceStatus::kFinished;
  // Choices still waiting for this one to prefill their prompt run on their own; one that ends
  // while it waits no longer holds its first choice back.
  if (seq.waiting_choices > 0) ReleaseChoices(seq);
  if (seq.waits_for != 0) UnlinkChoice(seq);
  // The α tuner learns what hits the cache gives; a request that scored its prompt could take
  // none of it, so it would only mislead the tuner, and a pin is no traffic.
  if (completed && cache_ != nullptr && !seq.request.prompt_logprobs && !seq.request.pin_prefix) {
    std::span<const int32_t> all(seq.tokens);
    cache_->ReportFinished(all.first(seq.prompt_tokens), all.subspan(seq.prompt_tokens),
                           seq.usage.cached_tokens);
  }
  ++stats_.finished;
  if (reason == FinishReason::kCancelled) ++stats_.cancelled;
  if (reason == FinishReason::kError) ++stats_.failed;

  const Clock::time_point now = Clock::now();
  auto seconds = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - seq.submitted).count();
  };
  Event event;
  event.kind = Event::Kind::kFinished;
  event.id = seq.id;
  event.finish_reason = reason;
  event.error = std::move(error);
  event.stop_string = std::move(stop_string);
  event.text = std::move(tail);
  if (completed && seq.request.prompt_logprobs && !seq.prompt_logprobs_sent &&
      seq.prompt_logprobs_missing() == 0) {
    // It generated nothing (max_new_tokens 0), so no token event carried them.
    event.prompt_logprobs = std::move(seq.prompt_logprobs);
    seq.prompt_logprobs_sent = true;
  }
  event.usage = seq.usage;
  event.usage.prompt_tokens = static_cast<int64_t>(seq.prompt_tokens);
  event.usage.completion_tokens = seq.generated();
  if (seq.request.reasoning_block) {
    event.usage.reasoning_tokens =
        CountReasoningTokens(*seq.request.reasoning_block,
                             std::span<const int32_t>(seq.tokens).subspan(seq.prompt_tokens));
  }
  if (seq.ever_admitted) event.timings.queued = seconds(seq.first_admitted);
  if (seq.generated() > 0) {
    event.timings.first_token = seconds(seq.first_token);
    if (seq.generated() > 1) {
      event.timings.mean_inter_token =
          std::chrono::duration<double>(seq.last_token - seq.first_token).count() /
          (seq.generated() - 1);
    }
  }
  event.timings.finished = seconds(now);
  event.seconds = event.timings.finished;
  if (pins && pin.ok()) event.pinned_prefix = *pin;
  seq.stream->Push(std::move(event));
}

absl::StatusOr<cache::PrefixCache::PinId> Scheduler::CheckPinnedBytes(
    absl::StatusOr<cache::PrefixCache::PinId> pin) {
  if (!pin.ok()) return pin;
  const size_t pinned = cache_->pinned_bytes();
  if (pinned <= config_.max_pinned_bytes) return pin;
  cache_->UnpinPrefix(*pin).IgnoreError();  // it was just made
  return absl::ResourceExhaustedError(absl::StrCat("the pinned prefixes would hold ", pinned,
                                                   " bytes, over the ", config_.max_pinned_bytes,
                                                   " allowed for them"));
}

absl::Status Scheduler::UnpinPrefix(uint64_t pin) {
  if (cache_ == nullptr) return absl::NotFoundError("the engine has no prefix cache");
  return cache_->UnpinPrefix(pin);
}

void Scheduler::RemoveFinished() {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const std::unique_ptr<Sequence>& s) {
                                  return s == nullptr || s->status == SequenceStatus::kFinished;
                                }),
                 running_.end());
}

void Scheduler::Preempt(Sequence& seq) {
  // The state goes to the cache (when there is one), so the resumed prefill restores most of it.
  // A refusal (counted in stats_.cache_insert_errors) costs only that: the sequence recomputes
  // the state when it resumes, and its output is unchanged.
  ReleaseState(seq, /*insert=*/true).IgnoreError();
  ++seq.usage.preemptions;
  ++stats_.preemptions;
  seq.status = SequenceStatus::kPreempted;
}

bool Scheduler::Admit(Sequence& seq) {
  // Memory for the live state, then the cached prefix, then KV pages for the rest of the
  // prompt (so a prefill in progress never needs a preemption for its own prompt). Running out
  // of memory leaves the sequence waiting; any other failure finishes it with that error.
  auto fail = [&](const absl::Status& status) {
    Finish(seq, FinishReason::kError, status);
    return false;
  };
  for (;;) {
    absl::StatusOr<SequenceMemory> memory = SequenceMemory::Create(*allocator_, model_);
    if (memory.ok()) {
      seq.memory.emplace(std::move(*memory));
      break;
    }
    if (!absl::IsResourceExhausted(memory.status())) return fail(memory.status());
    if (!EvictFor(cache::Pool::kSsmBlock, 1)) return false;
  }
  size_t cached = 0;
  // Rows for prompt logprobs still to come must be computed, so no restore reaches them.
  const size_t max_restore =
      seq.prompt_logprobs_missing() > 0 ? seq.prompt_logprobs.size() : SIZE_MAX;
  if (cache_ != nullptr) {
    for (;;) {
      absl::StatusOr<CacheBinding::Restored> restored = cache_->LookupAndRestore(
          seq.tokens, seq.request.checkpoint_hints, *seq.memory, max_restore);
      if (restored.ok()) {
        seq.lease = restored->lease;
        seq.checkpoint_positions = std::move(restored->checkpoint_positions);
        // What the cap left unused is not a hit that lacked a checkpoint.
        cached = std::min(restored->cached_tokens, max_restore);
        break;
      }
      seq.memory.reset();
      if (!absl::IsResourceExhausted(restored.status())) return fail(restored.status());
      // No page for the copy of a partly used cached page: start over with a fresh memory.
      if (!EvictFor(cache::Pool::kKvPage, 1)) return false;
      absl::StatusOr<SequenceMemory> memory = SequenceMemory::Create(*allocator_, model_);
      if (!memory.ok()) {
        return absl::IsResourceExhausted(memory.status()) ? false : fail(memory.status());
      }
      seq.memory.emplace(std::move(*memory));
    }
  }
  if (!ReserveKv(seq, static_cast<int64_t>(seq.tokens.size()), /*may_preempt=*/false)) {
    // ReserveKv finished the sequence itself if the failure was not for lack of memory.
    if (seq.status != SequenceStatus::kFinished) DropState(seq);
    return false;
  }
  seq.admission = next_admission_++;
  // A resumed sequence whose state the cache restored up to its last sampled token goes
  // straight back to decoding.
  const bool decode_next =
      seq.generated() > 0 && seq.computed() + 1 == static_cast<int64_t>(seq.tokens.size());
  seq.status = decode_next ? SequenceStatus::kDecoding : SequenceStatus::kPrefilling;
  if (!seq.ever_admitted) {
    seq.ever_admitted = true;
    seq.first_admitted = Clock::now();
    const auto usable = static_cast<uint64_t>(seq.computed());
    seq.usage.cached_tokens = static_cast<int64_t>(usable);
    stats_.prompt_tokens += seq.prompt_tokens;
    stats_.cached_tokens += usable;
    stats_.hit_without_checkpoint += cached > usable ? cached - usable : 0;
  }
  return true;
}

bool Scheduler::ReserveKv(Sequence& seq, int64_t end, bool may_preempt) {
  const int64_t page_tokens = model_.layout().page_tokens();
  for (;;) {
    absl::Status status = seq.memory->Reserve(end);
    if (status.ok()) return true;
    if (!absl::IsResourceExhausted(status)) {
      Finish(seq, FinishReason::kError, status);
      return false;
    }
    const auto missing =
        static_cast<size_t>((end + page_tokens - 1) / page_tokens -
                            static_cast<int64_t>(seq.memory->state().kv_pages.size()));
    if (EvictFor(cache::Pool::kKvPage, std::max<size_t>(missing, 1))) continue;
    if (!may_preempt) return false;
    // Preempt the most recently admitted running sequence (possibly `seq` itself).
    Sequence* victim = nullptr;
    for (auto& s : running_) {
      if (s && s->running() && (!victim || s->admission > victim->admission)) victim = s.get();
    }
    if (victim == &seq) {
      const bool alone = std::none_of(running_.begin(), running_.end(), [&](const auto& s) {
        return s && s.get() != &seq && s->running();
      });
      if (alone) {
        Finish(seq, FinishReason::kError,
               absl::ResourceExhaustedError(
                   absl::StrCat("the sequence needs ", end,
                                " positions of KV, more than the engine's memory "
                                "holds even with nothing else running")));
        return false;
      }
    }
    Preempt(*victim);
    if (victim == &seq) return false;
  }
}

void Scheduler::PlanSnapshots(Sequence& seq) {
  seq.step_snapshots.clear();
  const auto begin = static_cast<size_t>(seq.computed());
  const size_t end = begin + static_cast<size_t>(seq.step_tokens);
  for (size_t position : seq.checkpoint_positions) {
    if (position <= begin || position > end) continue;
    absl::StatusOr<SsmCheckpoint> block = SsmCheckpoint::Allocate(*allocator_);
    if (!block.ok() && EvictFor(cache::Pool::kSsmBlock, 1)) {
      block = SsmCheckpoint::Allocate(*allocator_);
    }
    if (!block.ok()) continue;  // a checkpoint is an optimisation: skip it rather than stall
    seq.step_snapshots.push_back({static_cast<int64_t>(position - begin), block->data()});
    seq.saved.emplace_back(position, std::move(*block));
  }
}

int64_t Scheduler::PromptLogprobLimit(const Sequence& seq, int64_t rows_left) {
  return seq.prompt_logprobs_missing() > 0 ? rows_left : std::numeric_limits<int64_t>::max();
}

void Scheduler::CollectPromptLogprobs(Sequence& seq, size_t i) {
  const int64_t begin = seq.computed() - seq.step_tokens;
  const auto top = static_cast<size_t>(*seq.request.prompt_logprobs);
  const auto vocab = static_cast<size_t>(runner_->vocab());
  for (size_t row = 0; row < runner_->rows(i); ++row) {
    // Row j follows token begin + j, so it predicts the one after. A row recomputed after a
    // resumed prefill restored less than it had scored adds nothing twice.
    const size_t position = static_cast<size_t>(begin) + row + 1;
    if (position >= seq.prompt_tokens || position != seq.prompt_logprobs.size() + 1) continue;
    std::vector<TopLogprob>& entry = seq.prompt_logprobs.emplace_back(1 + top);
    entry[0].token = seq.tokens[position];
    entry[0].logprob = ComputeLogprobs(std::span(runner_->logits_row(i, row), vocab),
                                       entry[0].token, std::span(entry).subspan(1));
  }
}

void Scheduler::Step() {
  ++stats_.steps;
  int64_t budget = config_.step_tokens;
  int64_t prompt_logprob_rows = config_.prompt_logprob_rows;
  scheduled_.clear();

  // Running sequences in admission order: decode rows first, then prefill chunks.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < running_.size(); ++i) {
      Sequence& seq = *running_[i];
      if (!seq.running()) continue;  // preempted or finished earlier in this step
      const bool decoding = seq.status == SequenceStatus::kDecoding;
      if (decoding != (pass == 0)) continue;
      const int64_t remaining = static_cast<int64_t>(seq.tokens.size()) - seq.computed();
      const int64_t n = std::min({remaining, budget, config_.prefill_chunk, ForkLimit(seq),
                                  PromptLogprobLimit(seq, prompt_logprob_rows)});
      if (n <= 0) continue;
      if (!ReserveKv(seq, seq.computed() + n, /*may_preempt=*/true)) continue;
      seq.step_tokens = n;
      budget -= n;
      if (seq.prompt_logprobs_missing() > 0) prompt_logprob_rows -= n;
      scheduled_.push_back(&seq);
    }
  }
  // Preempted sequences go back to the head of the queue, newest last so that the oldest
  // resumes first.
  std::vector<std::unique_ptr<Sequence>> preempted;
  for (auto& s : running_) {
    if (s && s->status == SequenceStatus::kPreempted) preempted.push_back(std::move(s));
  }
  std::sort(preempted.begin(), preempted.end(),
            [](const auto& a, const auto& b) { return a->admission > b->admission; });
  for (auto& s : preempted) waiting_.push_front(std::move(s));
  RemoveFinished();
  scheduled_.erase(std::remove_if(scheduled_.begin(), scheduled_.end(),
                                  [](Sequence* s) { return !s->running(); }),
                   scheduled_.end());

  // Admissions, in arrival order; one that does not fit blocks the ones behind it. Choices
  // waiting for their first choice's prefill are passed over, and so are requests scoring their
  // prompt once the step has no rows left for them (they keep their places for the next step).
  auto next_waiting = [&] {
    return std::find_if(waiting_.begin(), waiting_.end(), [&](const std::unique_ptr<Sequence>& s) {
      return s->waits_for == 0 && PromptLogprobLimit(*s, prompt_logprob_rows) > 0;
    });
  };
  for (auto it = next_waiting(); budget > 0 && it != waiting_.end() &&
                                 running_.size() < static_cast<size_t>(config_.max_running);
       it = next_waiting()) {
    Sequence& seq = **it;
    bool admitted = Admit(seq);
    if (!admitted && seq.status != SequenceStatus::kFinished && running_.empty() &&
        cache_ != nullptr) {
      // Nothing runs, so nothing cached is pinned: free all of it and try once more.
      cache_->EvictAll();
      admitted = Admit(seq);
    }
    if (!admitted && seq.status == SequenceStatus::kFinished) {
      // It failed with an error of its own (already sent); the ones behind it may still fit.
      waiting_.erase(it);
      continue;
    }
    if (!admitted) {
      if (running_.empty()) {
        std::unique_ptr<Sequence> doomed = std::move(*it);
        waiting_.erase(it);
        const size_t pinned = cache_ != nullptr ? cache_->pinned_bytes() : 0;
        Finish(*doomed, FinishReason::kError,
               absl::ResourceExhaustedError(absl::StrCat(
                   "prompt: ", doomed->tokens.size(),
                   " tokens do not fit in the engine's memory even with nothing else running",
                   pinned > 0 ? absl::StrCat(" (pinned prefixes hold ", pinned, " bytes of it)")
                              : "")));
        continue;
      }
      break;
    }
    // A first choice whose prompt the cache already held up to its last token has nothing to
    // share that the others cannot restore themselves.
    if (seq.waiting_choices > 0 && ForkLimit(seq) <= 0) ReleaseChoices(seq);
    const int64_t remaining = static_cast<int64_t>(seq.tokens.size()) - seq.computed();
    seq.step_tokens = std::min({remaining, budget, config_.prefill_chunk, ForkLimit(seq),
                                PromptLogprobLimit(seq, prompt_logprob_rows)});
    budget -= seq.step_tokens;
    if (seq.prompt_logprobs_missing() > 0) prompt_logprob_rows -= seq.step_tokens;
    running_.push_back(std::move(*it));
    waiting_.erase(it);
    scheduled_.push_back(running_.back().get());
  }
  UpdateReservedDemand();
  if (scheduled_.empty()) return;

  // The sequences' own snapshots first; drafts get only what is left of the budget and memory.
  for (Sequence* seq : scheduled_) PlanSnapshots(*seq);
  PlanDrafts(budget);

  inputs_.clear();
  logits_uses_.clear();
  sampling_rules_.clear();
  penalty_tokens_.clear();
  for (Sequence* seq : scheduled_) {
    const int64_t begin = seq->computed();
    const bool drafting = !seq->draft_input.empty();
    // A prefill that scores its prompt reads a row after each token.
    const bool scoring = seq->prompt_logprobs_missing() > 0;
    if (drafting) {
      // The last sampled token and the draft, with logits after each: row j says what follows
      // draft token j - 1.
      inputs_.push_back({&seq->memory->state(), seq->draft_input, seq->step_snapshots, true});
    } else {
      inputs_.push_back(
          {&seq->memory->state(),
           std::span<const int32_t>(seq->tokens)
               .subspan(static_cast<size_t>(begin), static_cast<size_t>(seq->step_tokens)),
           seq->step_snapshots, scoring});
    }
    // Only a step that reaches the end of the tokens samples. Greedy needs only the argmax;
    // other rules, and logprobs, are computed where the logits are. Structured output samples
    // on the host, from the whole row, after its grammar has chosen the allowed tokens; so does
    // a logit_bias. A draft's rows are used as plain decoding's row would be.
    // A request that only scores its prompt samples nothing. A scoring prefill reads its rows
    // whole, on the host, and samples from the last when the prompt ends there.
    seq->step_samples =
        drafting || begin + seq->step_tokens == static_cast<int64_t>(seq->tokens.size());
    const bool samples = seq->step_samples && seq->request.max_new_tokens > 0;
    const SamplingParams& params = seq->sampling.params();
    const bool on_host = seq->constraint || !params.logit_bias.empty() || scoring;
    logits_uses_.push_back(!samples && !scoring   ? LogitsUse::kNone
                           : on_host              ? LogitsUse::kRow
                           : params.argmax_only() ? LogitsUse::kArgmax
                                                  : LogitsUse::kSample);
    // One rule per logits row, read for kSample rows only.
    const size_t rows = drafting  ? seq->draft_input.size()
                        : scoring ? static_cast<size_t>(seq->step_tokens)
                                  : 1;
    if (logits_uses_.back() != LogitsUse::kSample) {
      sampling_rules_.resize(sampling_rules_.size() + rows);
    } else if (drafting) {
      AppendDraftRules(*seq);
    } else {
      // The sequence's generator draws now what BatchSampler would draw after the pass.
      AppendSampleRule(seq->sampling);
    }
  }
  // The runner isolates a failure to the sequences that cause it (errors_[i]) and fails as a
  // whole only when none of them ran. A sequence is sampled only when both say it ran, so no
  // logits row that was never written is ever read.
  const absl::Status run =
      runner_->Run(inputs_, &errors_, logits_uses_, {sampling_rules_, penalty_tokens_});
  for (size_t i = 0; i < scheduled_.size(); ++i) {
    Sequence& seq = *scheduled_[i];
    seq.step_snapshots.clear();
    absl::Status error = errors_[i];
    if (error.ok() && !run.ok()) error = run;
    if (!error.ok()) {
      Finish(seq, FinishReason::kError, std::move(error));
      continue;
    }
    stats_.prefill_tokens += seq.status == SequenceStatus::kDecoding ? 0 : seq.step_tokens;
    if (seq.prompt_logprobs_missing() > 0) CollectPromptLogprobs(seq, i);
    if (seq.step_samples && seq.request.max_new_tokens == 0) {
      Finish(seq, FinishReason::kLength);  // the prompt is scored: nothing to generate
      continue;
    }
    if (logits_uses_[i] == LogitsUse::kNone || !seq.step_samples) continue;
    // Row j follows draft token j - 1: it is read only while the draft agrees with what was
    // sampled, so the tokens emitted are those plain decoding would have emitted. A scoring
    // prefill samples from its last row only.
    const size_t first_row = seq.draft_input.empty() ? runner_->rows(i) - 1 : 0;
    for (size_t row = first_row; row < runner_->rows(i); ++row) {
      seq.draft_rows_read = static_cast<int64_t>(row) + 1;
      if (!SampleAndEmit(seq, i, row)) break;
      if (row >= seq.draft.size() || seq.tokens.back() != seq.draft[row]) break;
    }
    if (absl::Status settled = SettleDraft(seq); !settled.ok()) {
      Finish(seq, FinishReason::kError, std::move(settled));
    }
  }
  RemoveFinished();
  ForkChoices();
}

void Scheduler::AppendSampleRule(SamplingState& state) {
  const SamplingParams& params = state.params();
  kernels::SamplingRow& rule = sampling_rules_.emplace_back(params.rule());
  if (!params.greedy) rule.uniform = state.rng().Uniform();
  rule.penalties_begin = static_cast<int32_t>(penalty_tokens_.size());
  if (params.penalties().active()) AppendPenaltyTokens(state.counts(), &penalty_tokens_);
  rule.penalties_end = static_cast<int32_t>(penalty_tokens_.size());
}

BatchSampler& Scheduler::HostSampler() {
  if (!host_sampler_) host_sampler_.emplace(static_cast<int32_t>(runner_->vocab()));
  return *host_sampler_;
}

const std::shared_ptr<const TokenTrie>& Scheduler::token_trie() {
  if (token_trie_ == nullptr) {
    token_trie_ = std::make_shared<const TokenTrie>(
        TokenTrie::FromTokenizer(*tokenizer_, model_.config().vocab_size));
  }
  return token_trie_;
}

absl::StatusOr<std::optional<SampleResult>> Scheduler::SampleConstrained(Sequence& seq,
                                                                         const float* logits) {
  const Request& r = seq.request;
  end_tokens_ = r.stop_token_ids;
  if (!r.ignore_eos) {
    const auto& eos = model_.config().eos_token_ids;
    end_tokens_.insert(end_tokens_.end(), eos.begin(), eos.end());
  }
  if (absl::Status s = seq.constraint->AllowedTokens(end_tokens_, &allowed_tokens_); !s.ok()) {
    return s;
  }
  if (allowed_tokens_.empty()) {
    if (seq.constraint->complete()) return std::nullopt;
    return absl::FailedPreconditionError(
        "response format: no token of the vocabulary can continue the output within the grammar");
  }
  const auto vocab = static_cast<int32_t>(runner_->vocab());
  SampleResult sample = HostSampler().SampleRowAmong(std::span(logits, static_cast<size_t>(vocab)),
                                                     allowed_tokens_, seq.sampling);
  // An end token ends the output (Emit finishes the sequence); any other grows its text.
  if (std::find(end_tokens_.begin(), end_tokens_.end(), sample.token) == end_tokens_.end()) {
    if (absl::Status s = seq.constraint->Accept(tokenizer_->TokenBytes(sample.token)); !s.ok()) {
      return absl::InternalError(absl::StrCat("response format: an allowed token was refused: ",
                                              s.message()));
    }
  }
  return sample;
}

bool Scheduler::SampleAndEmit(Sequence& seq, size_t i, size_t row) {
  SampleResult sample;
  if (logits_uses_[i] == LogitsUse::kArgmax) {
    sample.token = runner_->token(i, row);  // picked where the logits are: no row came back
    seq.sampling.Accept(sample.token);
  } else if (logits_uses_[i] == LogitsUse::kSample) {
    const SamplingParams& params = seq.sampling.params();
    sample = FromSampled(runner_->sampled(i, row), params);
    // A draft's rows drew from a copy of the generator (AppendDraftRules): this row's draw
    // happens now, as it would have in plain decoding.
    if (!seq.draft_input.empty() && !params.greedy) seq.sampling.rng().Uniform();
    seq.sampling.Accept(sample.token);
  } else if (logits_uses_[i] == LogitsUse::kRow && !seq.constraint) {
    sample = HostSampler().SampleRow(
        std::span(runner_->logits_row(i, row), static_cast<size_t>(runner_->vocab())),
        seq.sampling);
  } else if (logits_uses_[i] == LogitsUse::kRow) {
    absl::StatusOr<std::optional<SampleResult>> chosen =
        SampleConstrained(seq, runner_->logits_row(i, row));
    if (!chosen.ok()) {
      Finish(seq, FinishReason::kError, chosen.status());
      return false;
    }
    if (!chosen->has_value()) {
      Finish(seq, FinishReason::kStop);
      return false;
    }
    Emit(seq, **chosen);
    if (seq.status == SequenceStatus::kFinished) return false;
    // A value that is whole with nothing to follow ends here, not one forced EOS later.
    if (seq.constraint->complete() && !seq.constraint->can_continue()) {
      Finish(seq, FinishReason::kStop);
      return false;
    }
    return true;
  } else {
    return false;  // kNone: nothing to sample
  }
  Emit(seq, sample);
  return seq.status != SequenceStatus::kFinished;
}

void Scheduler::Emit(Sequence& seq, const SampleResult& sample) {
  const int32_t token = sample.token;
  const Clock::time_point now = Clock::now();
  if (seq.generated() == 0) seq.first_token = now;
  seq.last_token = now;
  seq.tokens.push_back(token);
  ++stats_.generated_tokens;

  Event event;
  event.id = seq.id;
  event.seconds = std::chrono::duration<double>(now - seq.submitted).count();
  event.tokens.push_back(token);
  if (seq.request.prompt_logprobs && !seq.prompt_logprobs_sent) {
    event.prompt_logprobs = std::move(seq.prompt_logprobs);
    seq.prompt_logprobs_sent = true;
  }
  if (seq.request.sampling.logprobs || seq.request.sampling.top_logprobs > 0) {
    std::vector<TopLogprob>& lp = event.logprobs.emplace_back();
    lp.reserve(1 + sample.num_top);
    lp.push_back({token, sample.logprob});
    lp.insert(lp.end(), sample.top.begin(), sample.top.begin() + sample.num_top);
  }
  bool stop_text = false;
  if (seq.text) stop_text = seq.text->Add(token, &event.text);
  seq.stream->Push(std::move(event));

  const Request& r = seq.request;
  if (stop_text) {
    Finish(seq, FinishReason::kStop, absl::OkStatus(), seq.text->matched_stop());
    return;
  }
  const bool stop_id =
      std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
  const auto& eos = model_.config().eos_token_ids;
  const bool is_eos = !r.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
  if (stop_id || is_eos) {
    Finish(seq, FinishReason::kStop);
  } else if (seq.generated() >= r.max_new_tokens) {
    Finish(seq, FinishReason::kLength);
  } else {
    seq.status = SequenceStatus::kDecoding;
  }
}

void Scheduler::UpdateReservedDemand() {
  if (avmp_ == nullptr || model_.config().num_attention_layers == 0) return;
  size_t pages = 0;
  for (const auto& seq : running_) {
    if (!seq->memory) continue;
    const int64_t final_tokens =
        static_cast<int64_t>(seq->prompt_tokens) + seq->request.max_new_tokens;
    const auto needed = static_cast<size_t>(model_.layout().PagesFor(final_tokens));
    const size_t have = seq->memory->state().kv_pages.size();
    pages += needed > have ? needed - have : 0;
  }
  avmp_->SetReservedDemand(cache::Pool::kKvPage, pages);
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = stats_;
  s.running = running_.size();
  s.waiting = waiting_.size();
  s.memory = allocator_->allocator_stats();
  s.hydragen_nodes = runner_->forward_stats().hydragen_nodes;
  const kernels::PassReplayCounts replays = runner_->ops().replay_counts();
  s.graph_replays = replays.replayed;
  s.graph_captures = replays.captured;
  if (cache_ != nullptr) {
    s.cache = cache_->stats();
    s.alpha = cache_->alpha();
    s.alpha_tunings = cache_->alpha_tunings();
  }
  return s;
}

}  // namespace tandem::engine
