// One request inside the scheduler: its status (engine/sequence_status.h), its tokens so far, its
// memory while it is in the batch, its prefix-cache lease and saved SSM states, its sampler and
// its accounting. A preempted sequence goes back to the queue with its tokens and sampler
// intact, so it resumes where it stopped.
#ifndef TANDEM_ENGINE_SEQUENCE_H_
#define TANDEM_ENGINE_SEQUENCE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "cache/prefix_cache.h"
#include "engine/draft_tokens.h"
#include "engine/output_constraint.h"
#include "engine/output_text.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sampler.h"
#include "engine/sequence_memory.h"
#include "engine/sequence_status.h"
#include "models/forward_context.h"

namespace tandem::engine {

using Clock = std::chrono::steady_clock;

struct Sequence {
  Sequence(RequestId id, Request req, std::shared_ptr<RequestStream> out, Clock::time_point now)
      : id(id),
        request(std::move(req)),
        stream(std::move(out)),
        submitted(now),
        tokens(request.prompt),
        prompt_tokens(request.prompt.size()),
        sampling(request.sampling, request.prompt, request.max_new_tokens) {}

  const RequestId id;
  const Request request;
  const std::shared_ptr<RequestStream> stream;
  const Clock::time_point submitted;
  SequenceStatus status = SequenceStatus::kWaiting;
  bool running() const { return IsRunning(status); }

  // The prompt followed by every sampled token. All but the last sampled one have been (or,
  // after a preemption, will again be) run through the model.
  std::vector<int32_t> tokens;
  const size_t prompt_tokens;
  int32_t generated() const { return static_cast<int32_t>(tokens.size() - prompt_tokens); }

  // Running only.
  std::optional<SequenceMemory> memory;
  int64_t computed() const { return memory ? memory->state().tokens : 0; }
  std::optional<cache::PrefixCache::LeaseId> lease;  // pins the restored prefix in the tree
  std::vector<size_t> checkpoint_positions;  // where prefill saves the SSM state
  std::vector<std::pair<size_t, SsmCheckpoint>> saved;
  uint64_t admission = 0;  // order of the latest admission (preemption takes the newest)

  // This step's share, set when the batch is planned.
  int64_t step_tokens = 0;
  bool step_samples = false;  // the step reaches the end of the tokens: a token follows
  std::vector<models::SsmSnapshot> step_snapshots;

  // Speculative decoding, this step's (empty when the sequence does not speculate): the draft;
  // the pass's input, the last sampled token followed by the draft; the SSM states after each
  // input token but the last (draft_states[j]: after draft_base + 1 + j tokens), in blocks
  // borrowed for the step; and computed() before the pass.
  std::vector<int32_t> draft;
  std::vector<int32_t> draft_input;
  std::vector<SsmCheckpoint> draft_states;
  int64_t draft_base = 0;
  int64_t draft_rows_read = 0;  // rows of the pass sampled so far (each ran one input token)
  // Where the draft came from, and where in the expected sequence (prompt, prediction) the
  // next draft from the prediction should continue (DraftTokens' hint; 0: nowhere).
  std::optional<DraftPlace> draft_place;
  size_t prediction_hint = 0;
  size_t prediction_hint_tokens = 0;  // tokens.size() when the hint was set
  // Drafting backs off after drafts that were refused whole: text that does not repeat (or a
  // prediction the output has left) would otherwise pay a wasted verification on every chance
  // match. After the n-th such draft in a row, drafting pauses for 2^n generated tokens (at most
  // 64); a confirmed token resets it.
  int32_t draft_misses = 0;
  int32_t drafts_paused_until = 0;  // generated() from which the sequence drafts again

  // Several choices of one prompt (Engine::SubmitChoices) prefill it once. The first choice runs
  // the prompt up to its last token while the others wait; then it hands that state to the
  // prefix cache and goes back to the queue, and every choice restores it from there (as a
  // resumed preemption does) and runs the last token itself, with its own sampler.
  // On the first choice until it forks: how many choices wait for it.
  int32_t waiting_choices = 0;
  // On the other choices while they wait: the first choice's id (0 once free to run).
  RequestId waits_for = 0;

  // Request::prompt_logprobs: those of prompt tokens 1.. computed so far (they survive
  // preemption, so a resumed prefill needs rows only past them), until they go out with the
  // request's first event.
  std::vector<std::vector<TopLogprob>> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  // Prompt tokens whose logprob is still to be computed (0 without prompt logprobs).
  size_t prompt_logprobs_missing() const {
    if (!request.prompt_logprobs || prompt_logprobs_sent) return 0;
    return prompt_tokens - 1 - prompt_logprobs.size();
  }

  SamplingState sampling;          // generator and token counts: survive preemption
  std::optional<OutputText> text;  // when the engine has a tokenizer
  std::optional<OutputConstraint> constraint;  // structured output: where the text stands
  Usage usage;
  bool ever_admitted = false;
  Clock::time_point first_admitted, first_token, last_token;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_SEQUENCE_H_
