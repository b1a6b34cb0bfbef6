// The engine's use of the hybrid prefix cache (docs/ARCHITECTURE.md, "Request path", steps 4 and
// 7): before a sequence's prefill, find its usable cached prefix, restore that prefix's KV pages
// and SSM checkpoint into the sequence's memory and learn where prefill must save the SSM state
// (Marconi's speculative insertion); when the sequence finishes or is preempted, hand its pages and
// saved states to the tree. Also owns the online α tuner for FLOP-aware eviction.
#ifndef TANDEM_ENGINE_CACHE_BINDING_H_
#define TANDEM_ENGINE_CACHE_BINDING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/alpha_tuner.h"
#include "cache/block_allocator.h"
#include "cache/model_spec.h"
#include "cache/prefix_cache.h"
#include "cache/simulator.h"
#include "engine/sequence_memory.h"
#include "models/model.h"

namespace tandem::engine {

// The policies are the simulator's (cache/simulator.h: none, vllm-plus, sglang-plus, marconi),
// so `tandem simulate` and the engine mean the same thing by a name.
using cache::CachePolicy;
using cache::CachePolicyName;
using cache::ParseCachePolicy;

struct CacheBindingConfig {
  CachePolicy policy = CachePolicy::kMarconi;
  double alpha = -1;  // marconi: < 0 tunes α online, otherwise fixes it
  cache::TunerConfig tuner;
};

class CacheBinding {
 public:
  // nullptr for CachePolicy::kNone. `model`, `spec` and `allocator` must outlive the binding.
  static std::unique_ptr<CacheBinding> Create(const CacheBindingConfig& config,
                                              const models::Model& model,
                                              const cache::ModelSpec& spec,
                                              cache::BlockAllocator* allocator);
  ~CacheBinding();

  struct Restored {
    cache::PrefixCache::LeaseId lease = 0;
    size_t usable_tokens = 0;  // restored into the memory; prefill starts here
    size_t cached_tokens = 0;  // matched in the tree (≥ usable; the rest had no checkpoint)
    std::vector<size_t> checkpoint_positions;  // where prefill must save the SSM state
  };
  // Looks `tokens` up (keeping the last token for prefill: its logits are needed) and restores
  // the usable prefix, of at most `max_tokens`, into `memory`, a fresh sequence. `hints` are
  // further positions where the caller expects later requests to branch
  // (Request::checkpoint_hints): those the tree has no state for yet join the checkpoint positions.
  // On error (RESOURCE_EXHAUSTED: no memory for the copied partial page; anything else is a broken
  // invariant) the lease is released and `memory` must be discarded.
  [[nodiscard]] absl::StatusOr<Restored> LookupAndRestore(std::span<const int32_t> tokens,
                                                          std::span<const size_t> hints,
                                                          SequenceMemory& memory,
                                                          size_t max_tokens = SIZE_MAX);
  void Abort(cache::PrefixCache::LeaseId lease);
  // Inserts the first memory.state().tokens of `tokens` with the sequence's pages, its live SSM
  // state and the states it saved. Takes everything `memory` and `saved` own, even when the
  // tree refuses them (INVALID_ARGUMENT from PrefixCache::Insert: a broken invariant). With
  // `pin`, pins the inserted tokens as a prefix (PrefixCache::Insert says how).
  [[nodiscard]] absl::Status Insert(cache::PrefixCache::LeaseId lease,
                                    std::span<const int32_t> tokens, SequenceMemory& memory,
                                    std::vector<std::pair<size_t, SsmCheckpoint>>& saved,
                                    absl::StatusOr<cache::PrefixCache::PinId>* pin = nullptr);
  // PrefixCache::UnpinPrefix.
  absl::Status UnpinPrefix(cache::PrefixCache::PinId id) { return cache_->UnpinPrefix(id); }
  size_t pinned_bytes() const { return cache_->pinned_bytes(); }
  // Tells the α tuner about a finished request (once per request, after its last Insert).
  void ReportFinished(std::span<const int32_t> prompt, std::span<const int32_t> output,
                      size_t hit_tokens);

  // Evicts cached state until `units` of `pool` are free again; returns the units freed.
  size_t Evict(cache::Pool pool, size_t units) { return cache_->Evict(pool, units); }
  // Drops every unpinned node.
  void EvictAll() { cache_->EvictToBytes(0); }

  cache::PrefixCacheStats stats() const { return cache_->stats(); }
  double alpha() const { return cache_->alpha(); }
  size_t alpha_tunings() const { return tuner_ ? tuner_->tunings() : 0; }
  std::vector<cache::AlphaTuning> tuning_events() const {
    return tuner_
               ? std::vector<cache::AlphaTuning>(tuner_->events().begin(), tuner_->events().end())
               : std::vector<cache::AlphaTuning>{};
  }
  CachePolicy policy() const { return config_.policy; }
  // Waits for a background α replay (tests, shutdown).
  void WaitForTuner() {
    if (tuner_) tuner_->Wait();
  }

 private:
  CacheBinding(const CacheBindingConfig& config, const models::Model& model,
               cache::BlockAllocator* allocator)
      : config_(config), model_(model), allocator_(allocator) {}

  CacheBindingConfig config_;
  const models::Model& model_;
  cache::BlockAllocator* allocator_;
  std::unique_ptr<cache::PrefixCache> cache_;
  std::unique_ptr<cache::AlphaTuner> tuner_;
  std::vector<float*> page_ptrs_;  // reused by LookupAndRestore
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_CACHE_BINDING_H_
