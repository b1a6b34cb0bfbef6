// Speculative decoding inside the scheduler (SpeculationConfig in engine/scheduler.h): choosing a
// draft, giving it memory and a place in the pass, and taking the state back to the tokens kept.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/draft_tokens.h"
#include "engine/scheduler.h"

namespace tandem::engine {

namespace {

// Drafting pauses for at most 2^6 = 64 generated tokens after drafts refused whole.
constexpr int32_t kMaxDraftBackoff = 6;

size_t FreeUnits(const cache::BlockAllocator& allocator, cache::Pool pool) {
  const cache::PoolStats stats = allocator.stats(pool);
  return stats.capacity_units > stats.used_units ? stats.capacity_units - stats.used_units : 0;
}

}  // namespace

void Scheduler::PlanDrafts(int64_t budget) {
  const SpeculationConfig& spec = config_.speculation;
  const auto decoding = std::count_if(scheduled_.begin(), scheduled_.end(), [](Sequence* seq) {
    return seq->status == SequenceStatus::kDecoding;
  });
  if (spec.draft_tokens <= 0 || decoding > spec.max_batch) return;
  for (Sequence* seq : scheduled_) {
    if (budget <= 0) return;
    if (seq->status != SequenceStatus::kDecoding) continue;
    ProposeDraftFor(*seq, budget);
    BorrowDraftMemory(*seq);
    budget -= static_cast<int64_t>(seq->draft.size());
  }
}

void Scheduler::ProposeDraftFor(Sequence& seq, int64_t room) {
  seq.draft.clear();
  seq.draft_place.reset();
  const SpeculationConfig& spec = config_.speculation;
  // A checkpoint the cache asked for beyond this point would land among the draft's own
  // snapshots: such a step decodes plainly (a rare case: checkpoints sit inside prompts).
  const int64_t computed = seq.computed();
  if (std::any_of(seq.checkpoint_positions.begin(), seq.checkpoint_positions.end(),
                  [&](size_t p) { return static_cast<int64_t>(p) > computed; })) {
    return;
  }
  // Every step emits at least one token, so a draft longer than the tokens left to the
  // request's limit could never be kept whole.
  const int64_t left = seq.request.max_new_tokens - seq.generated() - 1;
  DraftOptions options;
  options.max_tokens = static_cast<int32_t>(
      std::min<int64_t>({spec.draft_tokens, room, left, config_.prefill_chunk - 1}));
  options.min_match = spec.min_match;
  options.prompt_lookup = spec.prompt_lookup;
  if (options.max_tokens <= 0 || seq.generated() < seq.drafts_paused_until) return;
  // The hint moves on with the tokens decoded since it was set.
  const size_t hint = seq.prediction_hint == 0
                          ? 0
                          : seq.prediction_hint + seq.tokens.size() - seq.prediction_hint_tokens;
  seq.draft_place = ProposeDraft(seq.tokens, seq.prompt_tokens, seq.request.prediction, options,
                                 &seq.draft, hint);
}

void Scheduler::BorrowDraftMemory(Sequence& seq) {
  // Only what is free: a draft is an optimisation, so it never evicts cached state, preempts a
  // sequence or makes AVMP move capacity between the pools (BlockAllocator::AllocateIfFree),
  // and it comes after every sequence's own needs of this step (PlanSnapshots ran first).
  const int64_t base = seq.computed();
  if (model_.config().num_ssm_layers > 0) {
    // The state after each input token but the last, which the live block holds.
    while (seq.draft_states.size() < seq.draft.size()) {
      absl::StatusOr<SsmCheckpoint> block =
          SsmCheckpoint::Allocate(*allocator_, /*only_free=*/true);
      if (!block.ok()) break;
      seq.draft_states.push_back(std::move(*block));
    }
    seq.draft.resize(seq.draft_states.size());
  }
  if (model_.config().num_attention_layers > 0 && !seq.draft.empty()) {
    const auto have = static_cast<int64_t>(seq.memory->state().kv_pages.size());
    const auto free = static_cast<int64_t>(FreeUnits(*allocator_, cache::Pool::kKvPage));
    auto pages_for = [&](size_t drafted) {
      return model_.layout().PagesFor(base + 1 + static_cast<int64_t>(drafted));
    };
    while (!seq.draft.empty() && pages_for(seq.draft.size()) - have > free) seq.draft.pop_back();
    if (!seq.memory->Reserve(base + 1 + static_cast<int64_t>(seq.draft.size()), true).ok()) {
      seq.memory->TrimTo(base + 1);
      seq.draft.clear();
    }
    if (seq.draft_states.size() > seq.draft.size()) {  // blocks beyond a shortened draft
      seq.draft_states.erase(seq.draft_states.begin() + static_cast<ptrdiff_t>(seq.draft.size()),
                             seq.draft_states.end());
    }
  }
  if (seq.draft.empty()) {
    seq.draft_states.clear();
    seq.draft_place.reset();
    return;
  }
  seq.draft_base = base;
  seq.draft_rows_read = 0;
  seq.draft_input.assign(1, seq.tokens.back());
  seq.draft_input.insert(seq.draft_input.end(), seq.draft.begin(), seq.draft.end());
  seq.step_tokens = static_cast<int64_t>(seq.draft_input.size());
  for (size_t j = 0; j < seq.draft_states.size(); ++j) {
    seq.step_snapshots.push_back({static_cast<int64_t>(j + 1), seq.draft_states[j].data()});
  }
}

void Scheduler::AppendDraftRules(Sequence& seq) {
  // Row j is sampled only if draft[0, j) was, so its rule is the one plain decoding would use
  // after them: the generator's next draw after j draws, and the penalty counts with those
  // tokens added. A copy of the sampling state gives both; the sequence's own generator
  // advances as rows are read (SampleAndEmit).
  SamplingState ahead = seq.sampling;
  for (size_t j = 0; j < seq.draft_input.size(); ++j) {
    AppendSampleRule(ahead);
    if (j < seq.draft.size()) ahead.Accept(seq.draft[j]);
  }
}

absl::Status Scheduler::SettleDraft(Sequence& seq) {
  if (seq.draft_input.empty()) {
    seq.draft.clear();
    seq.draft_states.clear();
    return absl::OkStatus();
  }
  absl::Status settled;
  if (seq.memory && seq.memory->state().tokens > seq.draft_base) {
    // The pass ran the whole draft. Each row read ran one more input token: the state plain
    // decoding would have is the one after those.
    const int64_t ran = seq.memory->state().tokens;
    const int64_t rows = seq.draft_rows_read;
    if (rows == 0) {
      // Ran, then failed before any row was sampled: nothing to keep, nothing to rewind to.
      settled = absl::InternalError("speculative decoding: the pass's rows were never read");
    } else if (seq.draft_base + rows < ran) {
      settled = seq.memory->Rewind(seq.draft_base + rows,
                                   seq.draft_states.empty()
                                       ? nullptr
                                       : seq.draft_states[static_cast<size_t>(rows - 1)].data());
    }
    // Drafted tokens confirmed: the emitted tokens that equal the draft, from its start.
    const auto emitted = static_cast<int64_t>(seq.tokens.size()) - 1 - seq.draft_base;
    int64_t accepted = 0;
    while (accepted < emitted && accepted < static_cast<int64_t>(seq.draft.size()) &&
           seq.tokens[static_cast<size_t>(seq.draft_base + 1 + accepted)] ==
               seq.draft[static_cast<size_t>(accepted)]) {
      ++accepted;
    }
    const auto drafted = static_cast<int64_t>(seq.draft.size());
    seq.usage.accepted_draft_tokens += accepted;
    seq.usage.rejected_draft_tokens += drafted - accepted;
    stats_.draft_tokens += static_cast<uint64_t>(drafted);
    stats_.accepted_draft_tokens += static_cast<uint64_t>(accepted);
    // A draft refused whole pauses drafting for a while, longer each time in a row.
    seq.draft_misses = accepted > 0 ? 0 : std::min(seq.draft_misses + 1, kMaxDraftBackoff);
    if (seq.draft_misses > 0) seq.drafts_paused_until = seq.generated() + (1 << seq.draft_misses);
    // The next draft from the prediction continues after the tokens emitted from this one.
    if (seq.draft_place && seq.draft_place->in_prediction) {
      seq.prediction_hint =
          seq.draft_place->at + static_cast<size_t>(std::max<int64_t>(emitted, 0));
      seq.prediction_hint_tokens = seq.tokens.size();
    }
    // The pages reserved for the refused part go back (the next step needs one more position).
    seq.memory->TrimTo(static_cast<int64_t>(seq.tokens.size()));
  }
  seq.draft.clear();
  seq.draft_input.clear();
  seq.draft_states.clear();  // back to the allocator
  seq.draft_place.reset();
  return settled;
}

}  // namespace tandem::engine
