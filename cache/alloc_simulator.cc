#include "cache/alloc_simulator.h"

#include <deque>

#include "cache/avmp_allocator.h"

namespace tandem::cache {
namespace {

struct Running {
  size_t index = 0;
  size_t tokens = 0;  // KV tokens held
  size_t remaining = 0;
  size_t kv_pages_left = 0;  // pages it will still allocate before it completes
  std::vector<Handle> handles;
  uint64_t blocked_at = UINT64_MAX;  // `frees` when its last allocation failed
};

constexpr uint64_t kMaxTicks = 10'000'000;

}  // namespace

absl::StatusOr<AllocSimulationResult> SimulateAllocator(const std::vector<AllocRequest>& requests,
                                                        NamedAllocator& named) {
  BlockAllocator& a = *named.allocator;
  const size_t page = named.kv_page_tokens;
  const bool has_kv = a.unit_bytes(Pool::kKvPage) > 0;
  const bool has_ssm = a.unit_bytes(Pool::kSsmBlock) > 0;
  AllocSimulationResult r;
  std::deque<size_t> queue;
  std::vector<Running> running;
  size_t next = 0;
  uint64_t tick = 0;
  bool hold_admissions = false;
  // A failed allocation is retried only after something was freed: retrying into an unchanged
  // allocator would only count the same shortage again.
  uint64_t frees = 0;
  uint64_t queue_blocked_at = UINT64_MAX;
  // The KV pages the running requests will still allocate: AVMP's reserved demand, so that it
  // does not move to the SSM pool capacity they are going to need.
  AvmpAllocator* const avmp = dynamic_cast<AvmpAllocator*>(&a);
  size_t kv_promised = 0;
  // `pages` of `run`'s promise were allocated, or will not be needed.
  auto settle = [&](Running& run, size_t pages) {
    run.kv_pages_left -= pages;
    kv_promised -= pages;
    if (avmp != nullptr) avmp->SetReservedDemand(Pool::kKvPage, kv_promised);
  };
  auto free_all = [&](std::vector<Handle>& hs) {
    for (Handle h : hs) a.Free(h);
    frees += hs.size();
    hs.clear();
  };
  while ((next < requests.size() || !queue.empty() || !running.empty()) && tick < kMaxTicks) {
    while (next < requests.size() && requests[next].arrival_tick <= tick) queue.push_back(next++);
    // Admit in order; stop at the first request that does not fit. After a preemption nothing
    // is admitted until a running request completes (otherwise the victim would come straight
    // back and the pool would thrash).
    while (!queue.empty() && !hold_admissions && queue_blocked_at != frees) {
      const AllocRequest& q = requests[queue.front()];
      Running run;
      run.index = queue.front();
      run.tokens = q.prompt_tokens;
      run.remaining = q.gen_tokens;
      const size_t prompt_pages = has_kv ? (q.prompt_tokens + page - 1) / page : 0;
      bool ok = true;
      if (has_ssm) {
        auto h = a.Allocate(Pool::kSsmBlock);
        ok = h.ok();
        if (ok) run.handles.push_back(*h);
      }
      for (size_t i = 0; ok && i < prompt_pages; ++i) {
        auto h = a.Allocate(Pool::kKvPage);
        ok = h.ok();
        if (ok) run.handles.push_back(*h);
      }
      if (!ok) {
        free_all(run.handles);
        if (running.empty()) {  // it can never fit
          ++r.dropped;
          queue.pop_front();
          continue;
        }
        queue_blocked_at = frees;
        break;
      }
      queue.pop_front();
      // Decoding takes a page at each page boundary, so the request ends holding the pages of
      // prompt + output; the prompt's are already taken.
      run.kv_pages_left = has_kv ? (q.prompt_tokens + q.gen_tokens + page - 1) / page : 0;
      kv_promised += run.kv_pages_left;
      settle(run, prompt_pages);
      running.push_back(std::move(run));
    }
    r.peak_running = std::max(r.peak_running, running.size());
    // One decode step for everyone.
    bool progressed = false;
    for (size_t i = 0; i < running.size();) {
      Running& run = running[i];
      bool stepped = true;
      if (has_kv && run.tokens % page == 0) {
        if (run.blocked_at == frees) {
          stepped = false;
        } else {
          auto h = a.Allocate(Pool::kKvPage);
          stepped = h.ok();
          if (stepped) {
            run.handles.push_back(*h);
            if (run.kv_pages_left > 0) settle(run, 1);
          } else {
            run.blocked_at = frees;
          }
        }
      }
      if (stepped && run.remaining > 0) {
        ++run.tokens;
        --run.remaining;
        progressed = true;
      }
      if (run.remaining == 0) {
        settle(run, run.kv_pages_left);
        free_all(run.handles);
        ++r.completed;
        hold_admissions = false;
        running.erase(running.begin() + i);
      } else {
        ++i;
      }
    }
    if (!progressed && !running.empty()) {
      // Every running request is stuck waiting for memory: preempt the newest (vLLM-style
      // recompute) so the others can move; it goes back to the head of the queue.
      Running& victim = running.back();
      settle(victim, victim.kv_pages_left);
      free_all(victim.handles);
      if (running.size() == 1) {
        ++r.dropped;  // alone and still stuck: it can never finish in this pool
      } else {
        queue.push_front(victim.index);
        ++r.preemptions;
        hold_admissions = true;
      }
      running.pop_back();
    }
    ++tick;
    if (running.empty()) hold_admissions = false;
    if (running.empty() && queue.empty() && next < requests.size()) {
      tick = std::max(tick, requests[next].arrival_tick);
    }
  }
  for (auto& run : running) free_all(run.handles);
  const AllocatorStats s = a.allocator_stats();
  r.ticks = tick;
  r.goodput = tick == 0 ? 0 : double(r.completed) / double(tick);
  r.oom_events = s.pools[0].oom_events + s.pools[1].oom_events;
  r.peak_reserved_bytes = s.peak_reserved_bytes;
  r.budget_bytes = s.budget_bytes;
  r.migrations = s.migrations;
  r.bytes_migrated = s.bytes_migrated;
  return r;
}

}  // namespace tandem::cache
