// Plays one request through a PrefixCache the way the engine does — look up, take the
// sequence's own KV pages and the requested SSM states from the allocator, insert — without
// running a model or writing any data. The simulator, the α tuner's replays and the benchmarks
// use it; the engine does the same steps with real prefill in between.
#ifndef TANDEM_CACHE_REQUEST_RUNNER_H_
#define TANDEM_CACHE_REQUEST_RUNNER_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cache/block_allocator.h"
#include "cache/prefix_cache.h"

namespace tandem::cache {

struct RequestOutcome {
  size_t prompt_tokens = 0;
  size_t usable_tokens = 0;  // prompt tokens served from the cache
};

// The prompt is looked up; `output` is what decoding appends (its KV and the final state are
// offered for insertion). When the allocator runs dry the cache is asked to evict; if that
// cannot free enough, the request is aborted and RESOURCE_EXHAUSTED returned (nothing leaks).
absl::StatusOr<RequestOutcome> RunRequest(PrefixCache& cache, BlockAllocator& allocator,
                                          absl::Span<const TokenId> prompt,
                                          absl::Span<const TokenId> output);

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_REQUEST_RUNNER_H_
