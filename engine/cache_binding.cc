#include "engine/cache_binding.h"

#include <algorithm>

namespace tandem::engine {

std::unique_ptr<CacheBinding> CacheBinding::Create(const CacheBindingConfig& config,
                                                   const models::Model& model,
                                                   const cache::ModelSpec& spec,
                                                   cache::BlockAllocator* allocator) {
  if (config.policy == CachePolicy::kNone) return nullptr;
  std::unique_ptr<CacheBinding> binding(new CacheBinding(config, model, allocator));
  cache::PrefixCacheConfig cc;
  cc.page_tokens = static_cast<size_t>(model.layout().page_tokens());
  cc.capacity_bytes = 0;  // the cache may use whatever running sequences leave free
  switch (config.policy) {
    case CachePolicy::kVllmPlus:
      cc.admission = cache::AdmissionPolicy::kEveryBlock;
      cc.eviction = cache::EvictionPolicy::kLruLeaves;
      break;
    case CachePolicy::kSglangPlus:
      cc.eviction = cache::EvictionPolicy::kLruLeaves;
      break;
    default:
      cc.eviction = cache::EvictionPolicy::kFlopAware;
      cc.alpha = config.alpha > 0 ? config.alpha : 0;
      break;
  }
  binding->cache_ = std::make_unique<cache::PrefixCache>(cc, spec, allocator);
  if (config.policy == CachePolicy::kMarconi && config.alpha < 0) {
    cache::TunerConfig tc = config.tuner;
    tc.synchronous = false;  // the engine loop never waits for a replay
    binding->tuner_ = std::make_unique<cache::AlphaTuner>(tc, binding->cache_.get());
  }
  return binding;
}

CacheBinding::~CacheBinding() {
  tuner_.reset();  // joins a running replay before the cache goes
}

absl::StatusOr<CacheBinding::Restored> CacheBinding::LookupAndRestore(
    std::span<const int32_t> tokens, std::span<const size_t> hints, SequenceMemory& memory,
    size_t max_tokens) {
  Restored restored;
  cache::PrefixCache::Hit hit = cache_->Lookup(absl::MakeConstSpan(tokens.data(), tokens.size()),
                                               std::min(tokens.size() - 1, max_tokens),
                                               absl::MakeConstSpan(hints.data(), hints.size()));
  restored.lease = hit.lease;
  restored.usable_tokens = hit.usable_tokens;
  restored.cached_tokens = hit.cached_tokens;
  restored.checkpoint_positions = std::move(hit.checkpoint_positions);
  if (hit.usable_tokens == 0) return restored;

  page_ptrs_.clear();
  for (cache::Handle h : hit.kv_pages) {
    page_ptrs_.push_back(reinterpret_cast<float*>(allocator_->Resolve(h)));
  }
  const float* checkpoint =
      hit.checkpoint.valid() ? reinterpret_cast<const float*>(allocator_->Resolve(hit.checkpoint))
                             : nullptr;
  if (checkpoint == nullptr && model_.config().num_ssm_layers > 0) {
    cache_->Abort(hit.lease);
    return absl::InternalError("the cache returned a usable prefix without an SSM checkpoint");
  }
  absl::Status status =
      memory.RestoreFrom(checkpoint, page_ptrs_, static_cast<int64_t>(hit.usable_tokens));
  if (!status.ok()) {
    cache_->Abort(hit.lease);
    return status;
  }
  return restored;
}

void CacheBinding::Abort(cache::PrefixCache::LeaseId lease) { cache_->Abort(lease); }

absl::Status CacheBinding::Insert(cache::PrefixCache::LeaseId lease,
                                  std::span<const int32_t> tokens, SequenceMemory& memory,
                                  std::vector<std::pair<size_t, SsmCheckpoint>>& saved,
                                  absl::StatusOr<cache::PrefixCache::PinId>* pin) {
  const size_t computed = static_cast<size_t>(memory.state().tokens);
  cache::PrefixCache::Completion done;
  done.tokens = absl::MakeConstSpan(tokens.data(), computed);
  for (auto& [position, checkpoint] : saved) {
    done.checkpoints.emplace_back(position, checkpoint.Release());
  }
  saved.clear();
  SequenceMemory::Released released = memory.Release();
  done.kv_pages = std::move(released.kv_pages);
  if (released.ssm_block.valid() && computed > 0) {
    done.checkpoints.emplace_back(computed, released.ssm_block);
  } else if (released.ssm_block.valid()) {
    allocator_->Free(released.ssm_block);
  }
  // Insert takes ownership of every handle even when it refuses the completion.
  return cache_->Insert(lease, std::move(done), pin);
}

void CacheBinding::ReportFinished(std::span<const int32_t> prompt, std::span<const int32_t> output,
                                  size_t hit_tokens) {
  if (tuner_ == nullptr) return;
  tuner_->OnRequest(absl::MakeConstSpan(prompt.data(), prompt.size()),
                    absl::MakeConstSpan(output.data(), output.size()), hit_tokens);
}

}  // namespace tandem::engine
