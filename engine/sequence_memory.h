// Binds a sequence's state (models::SequenceState) to memory from a cache::BlockAllocator: one
// SSM block for its recurrent state and KV pages grown on demand. Everything it allocated is
// returned when it is destroyed, so a cancelled or failed sequence cannot leak pool memory.
#ifndef TANDEM_ENGINE_SEQUENCE_MEMORY_H_
#define TANDEM_ENGINE_SEQUENCE_MEMORY_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/arena_allocator.h"
#include "cache/block_allocator.h"
#include "models/model.h"

namespace tandem::engine {

// One SSM block that holds a checkpoint: every SSM layer's state at one position.
class SsmCheckpoint {
 public:
  // `only_free`: only a block free now (BlockAllocator::AllocateIfFree), for optional uses.
  static absl::StatusOr<SsmCheckpoint> Allocate(cache::BlockAllocator& allocator,
                                                bool only_free = false);
  SsmCheckpoint(SsmCheckpoint&& other) noexcept;
  SsmCheckpoint& operator=(SsmCheckpoint&& other) noexcept;
  ~SsmCheckpoint();

  float* data() const { return data_; }
  cache::Handle handle() const { return handle_; }
  // Gives up ownership (to the prefix cache); the object no longer frees anything.
  cache::Handle Release();

 private:
  SsmCheckpoint(cache::BlockAllocator* allocator, cache::Handle handle, float* data)
      : allocator_(allocator), handle_(handle), data_(data) {}
  cache::BlockAllocator* allocator_ = nullptr;
  cache::Handle handle_;
  float* data_ = nullptr;
};

class SequenceMemory {
 public:
  // Takes the SSM block (zeroed: the state before any token). RESOURCE_EXHAUSTED if none is free.
  static absl::StatusOr<SequenceMemory> Create(cache::BlockAllocator& allocator,
                                               const models::Model& model);
  SequenceMemory(SequenceMemory&& other) noexcept;
  SequenceMemory& operator=(SequenceMemory&&) = delete;
  SequenceMemory(const SequenceMemory&) = delete;
  ~SequenceMemory();

  models::SequenceState& state() { return state_; }
  const models::SequenceState& state() const { return state_; }

  // Makes sure KV pages exist for `tokens` positions. RESOURCE_EXHAUSTED leaves the pages that
  // were already there (and any it added). `only_free`: from free pages only
  // (BlockAllocator::AllocateIfFree), for optional uses.
  absl::Status Reserve(int64_t tokens, bool only_free = false);
  // Frees the owned KV pages beyond those `tokens` positions need (pages a draft reserved).
  void TrimTo(int64_t tokens);

  // Sets this (fresh) sequence to position `position` of another one: the SSM block is copied
  // from `checkpoint` (taken after `position` tokens) and the KV of positions [0, position) comes
  // from `source_pages`. Full pages are shared, never written (later tokens go to later
  // positions); the page that `position` falls inside is copied into a page of our own, since
  // the next tokens will write into it.
  absl::Status RestoreFrom(const float* checkpoint, std::span<float* const> source_pages,
                           int64_t position);

  // Takes the sequence back to `position` tokens (at most state().tokens), as if the later ones
  // had never run: the SSM block is copied from `ssm_state`, the state after `position` tokens
  // (unread for a model without SSM layers). The KV of later positions stays where it is,
  // unread, until the tokens that follow overwrite it; its pages stay reserved.
  absl::Status Rewind(int64_t position, const float* ssm_state);

  // KV pages this sequence owns (excludes shared ones).
  size_t owned_pages() const { return owned_handles_.size(); }
  // Leading pages borrowed from a checkpoint's source by RestoreFrom (owned by someone else).
  size_t shared_pages() const { return state_.kv_pages.size() - owned_handles_.size(); }

  // Hands the state to the prefix cache: the owned KV pages in page order (they follow the
  // shared ones) and the SSM block holding the state after state().tokens tokens. Pages beyond
  // the ones that hold positions are freed first. Afterwards this object owns nothing and its
  // state is empty.
  struct Released {
    std::vector<cache::Handle> kv_pages;
    cache::Handle ssm_block;  // invalid for a model without SSM layers
  };
  Released Release();

 private:
  SequenceMemory(cache::BlockAllocator& allocator, const models::Model& model)
      : allocator_(&allocator), model_(&model) {}
  absl::StatusOr<float*> NewPage(bool only_free);

  cache::BlockAllocator* allocator_;
  const models::Model* model_;
  cache::Handle ssm_handle_;
  std::vector<cache::Handle> owned_handles_;
  models::SequenceState state_;
};

// Pools for `sequences` sequences of up to `positions` positions each, sharing nothing: their KV
// pages when the model has attention layers, an SSM block each when it has SSM layers (a pool
// the model does not use stays empty).
cache::ArenaConfig ArenaForSequences(const models::Model& model, int64_t sequences,
                                     int64_t positions);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_SEQUENCE_MEMORY_H_
