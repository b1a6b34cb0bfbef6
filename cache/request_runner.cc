#include "cache/request_runner.h"

#include <vector>

namespace tandem::cache {

absl::StatusOr<RequestOutcome> RunRequest(PrefixCache& cache, BlockAllocator& allocator,
                                          absl::Span<const TokenId> prompt,
                                          absl::Span<const TokenId> output) {
  PrefixCache::Hit hit = cache.Lookup(prompt);
  std::vector<TokenId> tokens;
  tokens.reserve(prompt.size() + output.size());
  tokens.insert(tokens.end(), prompt.begin(), prompt.end());
  tokens.insert(tokens.end(), output.begin(), output.end());

  PrefixCache::Completion done;
  auto give_up = [&](const absl::Status& why) {
    cache.Abort(hit.lease);
    for (Handle h : done.kv_pages) allocator.Free(h);
    for (auto& [pos, h] : done.checkpoints) allocator.Free(h);
    return why;
  };
  auto take = [&](Pool pool) -> absl::StatusOr<Handle> {
    while (true) {
      absl::StatusOr<Handle> h = allocator.Allocate(pool);
      if (h.ok() || cache.Evict(pool, 1) == 0) return h;
    }
  };
  const size_t page = cache.config().page_tokens;
  if (allocator.unit_bytes(Pool::kKvPage) > 0 && tokens.size() > hit.usable_tokens) {
    const size_t first = hit.usable_tokens / page, end = (tokens.size() + page - 1) / page;
    done.kv_pages.reserve(end - first);
    for (size_t i = first; i < end; ++i) {
      absl::StatusOr<Handle> h = take(Pool::kKvPage);
      if (!h.ok()) return give_up(h.status());
      done.kv_pages.push_back(*h);
    }
  }
  if (allocator.unit_bytes(Pool::kSsmBlock) > 0) {
    std::vector<size_t> positions = hit.checkpoint_positions;
    if (cache.config().admission == AdmissionPolicy::kEveryBlock) {
      // Decoding keeps checkpointing on the block grid.
      const size_t b = cache.config().block_tokens;
      for (size_t p = (prompt.size() / b + 1) * b; p < tokens.size(); p += b)
        positions.push_back(p);
    }
    positions.push_back(tokens.size());
    for (size_t pos : positions) {
      absl::StatusOr<Handle> h = take(Pool::kSsmBlock);
      if (!h.ok()) return give_up(h.status());
      done.checkpoints.push_back({pos, *h});
    }
  }
  done.tokens = tokens;
  if (absl::Status s = cache.Insert(hit.lease, std::move(done)); !s.ok()) return s;
  return RequestOutcome{prompt.size(), hit.usable_tokens};
}

}  // namespace tandem::cache
