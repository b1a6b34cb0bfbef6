// Several choices of one prompt inside the scheduler (Engine::SubmitChoices): the prompt is
// prefilled once, by the first choice, and every choice restores that state from the prefix
// cache. The cache is what shares it, rather than a copy from one sequence to the others: its
// leases already pin shared KV pages for as long as any sequence reads them, copy the partly
// filled last page, and give the SSM state each sequence its own block, all of which a resumed
// preemption exercises on every busy server. So a choice's output is exactly a lone request's
// (a cache hit gives the bits of a miss), and if the cache drops the state before a choice is
// admitted, that choice only prefills the prompt itself.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "engine/scheduler.h"

namespace tandem::engine {

void Scheduler::LinkChoice(Sequence& seq, RequestId first) {
  // Without a cache nothing can carry the state over; a one-token prompt has no prefix to share.
  if (cache_ == nullptr || seq.prompt_tokens < 2) return;
  for (const std::unique_ptr<Sequence>& other : waiting_) {
    if (other->id != first) continue;
    // Only a first choice still in the queue has its whole prefill ahead.
    if (other->status == SequenceStatus::kWaiting && other->waits_for == 0 &&
        other->tokens == seq.tokens) {
      ++other->waiting_choices;
      seq.waits_for = first;
    }
    return;
  }
}

int64_t Scheduler::ForkLimit(const Sequence& seq) {
  if (seq.waiting_choices == 0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(seq.prompt_tokens) - 1 - seq.computed();
}

void Scheduler::ReleaseChoices(Sequence& first) {
  first.waiting_choices = 0;
  for (const std::unique_ptr<Sequence>& seq : waiting_) {
    if (seq->waits_for == first.id) seq->waits_for = 0;
  }
}

void Scheduler::UnlinkChoice(Sequence& seq) {
  const RequestId first_id = std::exchange(seq.waits_for, 0);
  auto unlink = [&](const std::unique_ptr<Sequence>& first) {
    if (first == nullptr || first->id != first_id) return false;
    if (first->waiting_choices > 0) --first->waiting_choices;
    return true;
  };
  if (std::none_of(waiting_.begin(), waiting_.end(), unlink)) {
    (void)std::any_of(running_.begin(), running_.end(), unlink);
  }
}

void Scheduler::ForkChoices() {
  // Each forking group: its first choice, then the choices that waited for it.
  std::vector<std::vector<std::unique_ptr<Sequence>>> groups;
  for (std::unique_ptr<Sequence>& seq : running_) {
    if (!seq->running() || seq->waiting_choices == 0 || ForkLimit(*seq) > 0) continue;
    std::vector<std::unique_ptr<Sequence>> group;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->waits_for == seq->id) {
        (*it)->waits_for = 0;
        // Its prompt's logprobs are the first choice's, which scored the whole prompt.
        if (seq->request.prompt_logprobs && seq->prompt_logprobs_missing() == 0) {
          (*it)->prompt_logprobs = seq->prompt_logprobs;
        }
        group.push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    seq->waiting_choices = 0;
    if (group.empty()) continue;  // they were all cancelled: nothing to share
    // The prompt but its last token goes to the cache, as a preemption's state would (not
    // counted as one: the sequence is not short of memory). A refusal, counted in
    // stats_.cache_insert_errors, costs only the others' prefill.
    ReleaseState(*seq, /*insert=*/true).IgnoreError();
    seq->status = SequenceStatus::kPreempted;
    group.insert(group.begin(), std::move(seq));
    groups.push_back(std::move(group));
  }
  if (groups.empty()) return;
  RemoveFinished();  // drops the moved-from slots
  // To the head of the queue, the groups in admission order: they were in the batch already.
  for (auto group = groups.rbegin(); group != groups.rend(); ++group) {
    for (auto seq = group->rbegin(); seq != group->rend(); ++seq) {
      waiting_.push_front(std::move(*seq));
    }
  }
}

}  // namespace tandem::engine
