// Builds an allocator from its command-line name and a model spec:
//   padded-unified | fixed-dual:R | avmp-static:R | avmp-dynamic[:R] | avmp-dynamic-paper[:R]
// R is SGLang's mamba_full_memory_ratio (SSM:KV bytes; SSM share = R/(1+R)). avmp-dynamic
// starts from R (default 1, an even split) and migrates from there with the demand-aware rules
// (cache/avmp_allocator.h); avmp-dynamic-paper migrates by the paper's rules alone.
#ifndef TANDEM_CACHE_ALLOCATOR_FACTORY_H_
#define TANDEM_CACHE_ALLOCATOR_FACTORY_H_

#include <memory>
#include <string>

#include "cache/block_allocator.h"
#include "cache/memory_backing.h"
#include "cache/model_spec.h"

namespace tandem::cache {

struct AllocatorOptions {
  size_t budget_bytes = 0;
  size_t page_tokens = 16;
  BackingKind backing = BackingKind::kAccounting;
  // When set, replaces `backing`: reserves the memory (at least the bytes asked for) somewhere
  // else, a GPU's for instance. Only the AVMP allocators take one (the baselines map their host
  // range once and never commit), so the others refuse it.
  BackingFactory make_backing = nullptr;
  // The units' sizes when they are not the spec's (0: the spec's): a tensor-parallel model's
  // units hold every worker's part, some of them (Mamba-2 groups that fewer workers share)
  // held twice.
  size_t kv_page_bytes = 0;
  size_t ssm_block_bytes = 0;
  // AVMP knobs (ignored by the baselines).
  size_t migration_batch_size = 128;
  double threshold_high = 0.30;
  uint64_t min_rebalance_interval_ops = 1000;
};

struct NamedAllocator {
  std::string name;
  std::unique_ptr<BlockAllocator> allocator;
  // Tokens one kKvPage unit holds (padded-unified enlarges pages to the SSM state's size).
  size_t kv_page_tokens = 0;
};

// INVALID_ARGUMENT for an unknown name or a malformed ratio.
absl::StatusOr<NamedAllocator> CreateAllocator(const std::string& name, const ModelSpec& spec,
                                               const AllocatorOptions& options);

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_ALLOCATOR_FACTORY_H_
