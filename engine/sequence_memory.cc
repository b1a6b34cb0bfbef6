#include "engine/sequence_memory.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::engine {

absl::StatusOr<SsmCheckpoint> SsmCheckpoint::Allocate(cache::BlockAllocator& allocator,
                                                      bool only_free) {
  TANDEM_ASSIGN_OR_RETURN(cache::Handle handle,
                          only_free ? allocator.AllocateIfFree(cache::Pool::kSsmBlock)
                                    : allocator.Allocate(cache::Pool::kSsmBlock));
  return SsmCheckpoint(&allocator, handle, reinterpret_cast<float*>(allocator.Resolve(handle)));
}

SsmCheckpoint::SsmCheckpoint(SsmCheckpoint&& other) noexcept
    : allocator_(other.allocator_), handle_(other.handle_), data_(other.data_) {
  other.allocator_ = nullptr;
}

SsmCheckpoint& SsmCheckpoint::operator=(SsmCheckpoint&& other) noexcept {
  if (this != &other) {
    if (allocator_ != nullptr) allocator_->Free(handle_);
    allocator_ = std::exchange(other.allocator_, nullptr);
    handle_ = other.handle_;
    data_ = other.data_;
  }
  return *this;
}

cache::Handle SsmCheckpoint::Release() {
  allocator_ = nullptr;
  return handle_;
}

SsmCheckpoint::~SsmCheckpoint() {
  if (allocator_ != nullptr) allocator_->Free(handle_);
}

absl::StatusOr<SequenceMemory> SequenceMemory::Create(cache::BlockAllocator& allocator,
                                                      const models::Model& model) {
  SequenceMemory memory(allocator, model);
  if (model.config().num_ssm_layers > 0) {
    TANDEM_ASSIGN_OR_RETURN(memory.ssm_handle_, allocator.Allocate(cache::Pool::kSsmBlock));
    std::byte* block = allocator.Resolve(memory.ssm_handle_);
    memory.state_.ssm = reinterpret_cast<float*>(block);
    // Zero is the state before the first token.
    TANDEM_RETURN_IF_ERROR(allocator.ZeroBytes(block, model.layout().ssm_block_bytes()));
  }
  return memory;
}

SequenceMemory::SequenceMemory(SequenceMemory&& other) noexcept
    : allocator_(other.allocator_),
      model_(other.model_),
      ssm_handle_(std::exchange(other.ssm_handle_, cache::Handle())),
      owned_handles_(std::move(other.owned_handles_)),
      state_(std::move(other.state_)) {
  other.owned_handles_.clear();
  other.state_ = {};
}

SequenceMemory::~SequenceMemory() {
  for (cache::Handle h : owned_handles_) allocator_->Free(h);
  if (ssm_handle_.valid()) allocator_->Free(ssm_handle_);
}

SequenceMemory::Released SequenceMemory::Release() {
  Released released;
  TrimTo(state_.tokens);
  released.kv_pages = std::move(owned_handles_);
  owned_handles_.clear();
  released.ssm_block = std::exchange(ssm_handle_, cache::Handle());
  state_ = {};
  return released;
}

absl::StatusOr<float*> SequenceMemory::NewPage(bool only_free) {
  TANDEM_ASSIGN_OR_RETURN(cache::Handle h, only_free
                                               ? allocator_->AllocateIfFree(cache::Pool::kKvPage)
                                               : allocator_->Allocate(cache::Pool::kKvPage));
  owned_handles_.push_back(h);
  return reinterpret_cast<float*>(allocator_->Resolve(h));
}

absl::Status SequenceMemory::Reserve(int64_t tokens, bool only_free) {
  if (model_->config().num_attention_layers == 0) return absl::OkStatus();
  const int64_t needed = model_->layout().PagesFor(tokens);
  while (static_cast<int64_t>(state_.kv_pages.size()) < needed) {
    TANDEM_ASSIGN_OR_RETURN(float* page, NewPage(only_free));
    state_.kv_pages.push_back(page);
  }
  return absl::OkStatus();
}

void SequenceMemory::TrimTo(int64_t tokens) {
  const auto needed =
      static_cast<size_t>(model_->layout().PagesFor(std::max(tokens, state_.tokens)));
  while (state_.kv_pages.size() > needed && !owned_handles_.empty()) {
    allocator_->Free(owned_handles_.back());
    owned_handles_.pop_back();
    state_.kv_pages.pop_back();
  }
}

absl::Status SequenceMemory::Rewind(int64_t position, const float* ssm_state) {
  if (position < 0 || position > state_.tokens) {
    return absl::InvalidArgumentError(absl::StrCat("cannot rewind a sequence of ", state_.tokens,
                                                   " tokens to position ", position));
  }
  if (state_.ssm != nullptr && position != state_.tokens) {
    TANDEM_RETURN_IF_ERROR(allocator_->CopyBytes(reinterpret_cast<std::byte*>(state_.ssm),
                                                 reinterpret_cast<const std::byte*>(ssm_state),
                                                 model_->layout().ssm_block_bytes()));
  }
  state_.tokens = position;
  return absl::OkStatus();
}

absl::Status SequenceMemory::RestoreFrom(const float* checkpoint,
                                         std::span<float* const> source_pages, int64_t position) {
  if (state_.tokens != 0 || !state_.kv_pages.empty()) {
    return absl::FailedPreconditionError("restore needs a fresh sequence");
  }
  const models::StateLayout& layout = model_->layout();
  if (model_->config().num_attention_layers > 0 &&
      static_cast<int64_t>(source_pages.size()) < layout.PagesFor(position)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_pages.size(), " source KV pages cannot hold ", position, " positions"));
  }
  if (state_.ssm != nullptr) {
    TANDEM_RETURN_IF_ERROR(allocator_->CopyBytes(reinterpret_cast<std::byte*>(state_.ssm),
                                                 reinterpret_cast<const std::byte*>(checkpoint),
                                                 layout.ssm_block_bytes()));
  }
  if (model_->config().num_attention_layers > 0) {
    const int64_t full = position / layout.page_tokens();
    for (int64_t i = 0; i < full; ++i) state_.kv_pages.push_back(source_pages[i]);
    if (position % layout.page_tokens() != 0) {
      TANDEM_ASSIGN_OR_RETURN(float* page, NewPage(false));
      state_.kv_pages.push_back(page);
      TANDEM_RETURN_IF_ERROR(allocator_->CopyBytes(
          reinterpret_cast<std::byte*>(page),
          reinterpret_cast<const std::byte*>(source_pages[full]), layout.kv_page_bytes()));
    }
  }
  state_.tokens = position;
  return absl::OkStatus();
}

cache::ArenaConfig ArenaForSequences(const models::Model& model, int64_t sequences,
                                     int64_t positions) {
  const models::StateLayout& layout = model.layout();
  cache::ArenaConfig arena;
  arena.kv_page_bytes = layout.kv_page_bytes();
  if (model.config().num_attention_layers > 0) {
    arena.kv_pages = static_cast<size_t>(sequences * layout.PagesFor(positions));
  }
  arena.ssm_block_bytes = layout.ssm_block_bytes();
  if (model.config().num_ssm_layers > 0) arena.ssm_blocks = static_cast<size_t>(sequences);
  return arena;
}

}  // namespace tandem::engine
