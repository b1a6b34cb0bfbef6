#include "kernels/deferred_calls.h"

#include <algorithm>
#include <cstring>

namespace tandem::kernels {

std::byte* DeferredCalls::Append(size_t bytes, Invoker invoke) {
  const size_t entry_bytes = RoundUp(sizeof(Entry));
  const size_t need = used_ + entry_bytes + RoundUp(bytes);
  if (need > capacity_) {
    const size_t capacity = std::max(need, std::max<size_t>(capacity_ * 2, 4096));
    std::unique_ptr<std::byte[]> grown(new std::byte[capacity]);
    // Every stored call is trivially copyable, so its bytes are the call.
    if (used_ > 0) std::memcpy(grown.get(), arena_.get(), used_);
    arena_ = std::move(grown);
    capacity_ = capacity;
  }
  std::byte* entry = arena_.get() + used_;
  new (entry) Entry{invoke, RoundUp(bytes)};
  used_ = need;
  ++count_;
  return entry + entry_bytes;
}

void DeferredCalls::RunAll() const {
  const size_t entry_bytes = RoundUp(sizeof(Entry));
  for (size_t at = 0; at < used_;) {
    Entry entry;
    std::memcpy(&entry, arena_.get() + at, sizeof(Entry));
    entry.invoke(arena_.get() + at + entry_bytes);
    at += entry_bytes + entry.bytes;
  }
}

}  // namespace tandem::kernels
