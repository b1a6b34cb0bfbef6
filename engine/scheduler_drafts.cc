// Speculative decoding inside the scheduler (SpeculationConfig in engine/scheduler.h): choosing a
// draft, laying out its verification pass, and taking the state back to the tokens kept.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/draft_tokens.h"
#include "engine/scheduler.h"

namespace tandem::engine {

void Scheduler::ProposeDraftFor(Sequence& seq, int64_t room) {
  seq.draft.clear();
  const SpeculationConfig& spec = config_.speculation;
  if (spec.draft_tokens <= 0 || decoding_this_step_ > spec.max_batch) return;
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
  if (options.max_tokens <= 0) return;
  ProposeDraft(seq.tokens, seq.prompt_tokens, seq.request.prediction, options, &seq.draft);
}

void Scheduler::BorrowDraftStates(Sequence& seq) {
  seq.draft_base = seq.computed();
  if (model_.config().num_ssm_layers > 0) {
    // The state after each input token but the last, which the live block holds. No cached
    // state is evicted for these: a draft is an optimisation, and a shorter one will do.
    for (size_t j = 0; j < seq.draft.size(); ++j) {
      absl::StatusOr<SsmCheckpoint> block = SsmCheckpoint::Allocate(*allocator_);
      if (!block.ok()) break;
      seq.draft_states.push_back(std::move(*block));
    }
    seq.draft.resize(seq.draft_states.size());
  }
  if (seq.draft.empty()) return;
  seq.draft_input.assign(1, seq.tokens.back());
  seq.draft_input.insert(seq.draft_input.end(), seq.draft.begin(), seq.draft.end());
  seq.step_tokens = static_cast<int64_t>(seq.draft_input.size());
  for (size_t j = 0; j < seq.draft_states.size(); ++j) {
    seq.step_snapshots.push_back({static_cast<int64_t>(j + 1), seq.draft_states[j].data()});
  }
}

absl::Status Scheduler::SettleDraft(Sequence& seq) {
  if (seq.draft_input.empty()) {
    seq.draft.clear();
    seq.draft_states.clear();
    return absl::OkStatus();
  }
  absl::Status rewound;
  if (seq.memory) {
    // The state ran the whole draft (or, after a failed pass, none of it); the sequence keeps
    // the tokens up to its last emitted one, which is not run yet.
    const int64_t ran = seq.memory->state().tokens;
    const auto kept = static_cast<int64_t>(seq.tokens.size()) - 1;
    if (kept < ran) {
      const int64_t after = kept - seq.draft_base;  // input tokens kept, at least 1
      const float* state = after >= 1 && after <= static_cast<int64_t>(seq.draft_states.size())
                               ? seq.draft_states[static_cast<size_t>(after - 1)].data()
                               : nullptr;
      rewound = state != nullptr || model_.config().num_ssm_layers == 0
                    ? seq.memory->Rewind(kept, state)
                    : absl::InternalError(absl::StrCat("speculative decoding: no saved state "
                                                       "after ",
                                                       after, " of the pass's tokens"));
    }
    if (ran > seq.draft_base) {
      // The pass ran: every emitted token after the first was a confirmed draft token.
      const int64_t emitted = static_cast<int64_t>(seq.tokens.size()) - 1 - seq.draft_base;
      const int64_t accepted = std::max<int64_t>(emitted - 1, 0);
      const auto drafted = static_cast<int64_t>(seq.draft.size());
      seq.usage.accepted_draft_tokens += accepted;
      seq.usage.rejected_draft_tokens += drafted - accepted;
      stats_.draft_tokens += static_cast<uint64_t>(drafted);
      stats_.accepted_draft_tokens += static_cast<uint64_t>(accepted);
    }
  }
  seq.draft.clear();
  seq.draft_input.clear();
  seq.draft_states.clear();  // back to the allocator
  return rewound;
}

}  // namespace tandem::engine
