#include "kernels/workspace.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace tandem::kernels {
namespace {
constexpr size_t kAlign = 64;
size_t RoundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

class HostMemorySource final : public MemorySource {
 public:
  void* Allocate(size_t bytes) override { return std::aligned_alloc(kAlign, bytes); }
  void Release(void* p) override { std::free(p); }
};
}  // namespace

MemorySource& HostMemory() {
  static HostMemorySource host;
  return host;
}

Workspace::Block Workspace::NewBlock(size_t bytes) {
  bytes = RoundUp(std::max<size_t>(bytes, kAlign));
  auto* p = static_cast<std::byte*>(source_->Allocate(bytes));
  if (p == nullptr) throw std::bad_alloc();
  return Block{{p, Release{source_}}, bytes};
}

Workspace::Workspace(size_t initial_bytes, MemorySource* source)
    : source_(source != nullptr ? source : &HostMemory()) {
  blocks_.push_back(NewBlock(initial_bytes));
  blocks_allocated_ = 1;
}

float* Workspace::Floats(size_t count) {
  const size_t bytes = RoundUp(std::max<size_t>(count, 1) * sizeof(float));
  if (used_in_last_ + bytes > blocks_.back().size) {
    blocks_.push_back(NewBlock(std::max(bytes, blocks_.back().size)));
    ++blocks_allocated_;
    grown_ = true;
    used_in_last_ = 0;
  }
  std::byte* p = blocks_.back().data.get() + used_in_last_;
  used_in_last_ += bytes;
  used_total_ += bytes;
  high_water_ = std::max(high_water_, used_total_);
  return reinterpret_cast<float*>(p);
}

void Workspace::Reset() {
  // Merge whenever the pass outgrew the block, even if Rewind has already dropped the extra
  // blocks: otherwise a pass whose layers each overflow would allocate and free a block per
  // layer forever (megabytes per step, which fragmented the engine thread's malloc arena until
  // the server's RSS grew by hundreds of MB; docs/BENCHMARKS.md "Memory under sustained load").
  if (grown_) {
    blocks_.clear();
    blocks_.push_back(NewBlock(high_water_));
    ++blocks_allocated_;
    grown_ = false;
  }
  used_in_last_ = 0;
  used_total_ = 0;
}

void Workspace::Rewind(const Mark& mark) {
  // Blocks added after the mark are dropped; Reset() later merges the high-water mark into one.
  while (blocks_.size() > mark.blocks) blocks_.pop_back();
  used_in_last_ = mark.used_in_last;
  used_total_ = mark.used_total;
}

size_t Workspace::capacity_bytes() const {
  size_t total = 0;
  for (const Block& b : blocks_) total += b.size;
  return total;
}

}  // namespace tandem::kernels
