// Allocator simulation (`tandem simulate-alloc`), after the AVMP paper's harness: requests
// arrive at ticks; on admission a request takes KV pages for its prompt and one SSM block; each
// tick every running request decodes one token, taking a new page when it crosses a page
// boundary; when done it frees everything. A failed allocation is an OOM event: an admission
// stays queued (FIFO), a decode step stalls, and either retries once something has been freed
// (retrying into an unchanged allocator would count one shortage many times); when no running
// request can make progress the newest is preempted (freed and requeued at the head). A
// request that cannot be admitted into an otherwise idle allocator is dropped. Admission is
// greedy for every allocator; for AVMP the admission path also keeps the KV pool's reserved
// demand current (the pages running requests will still allocate), which its demand-aware
// migration rules read (cache/avmp_allocator.h).
#ifndef TANDEM_CACHE_ALLOC_SIMULATOR_H_
#define TANDEM_CACHE_ALLOC_SIMULATOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/allocator_factory.h"
#include "cache/workloads.h"

namespace tandem::cache {

struct AllocSimulationResult {
  uint64_t oom_events = 0;
  uint64_t completed = 0;
  uint64_t dropped = 0;
  uint64_t preemptions = 0;  // running requests restarted because none could make progress
  uint64_t ticks = 0;
  double goodput = 0;  // completed requests per simulated tick
  size_t peak_reserved_bytes = 0;
  size_t budget_bytes = 0;
  uint64_t migrations = 0;
  uint64_t bytes_migrated = 0;
  size_t peak_running = 0;
};

absl::StatusOr<AllocSimulationResult> SimulateAllocator(const std::vector<AllocRequest>& requests,
                                                        NamedAllocator& allocator);

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_ALLOC_SIMULATOR_H_
