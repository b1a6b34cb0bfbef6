// Scratch memory for ops and layer graphs. A bump allocator that is reset once per forward pass:
// it grows only while it warms up (the first passes of each shape), so the steady state performs
// no heap allocation per token. Its blocks come from a MemorySource: host memory by default, a
// device backend's memory for activations that live on a GPU.
#ifndef TANDEM_KERNELS_WORKSPACE_H_
#define TANDEM_KERNELS_WORKSPACE_H_

#include <cstddef>
#include <memory>
#include <vector>

namespace tandem::kernels {

// Where a workspace's blocks come from. Allocate returns `bytes` aligned to 64 bytes, or null
// when there is no memory left (the workspace then throws std::bad_alloc, as new does).
class MemorySource {
 public:
  virtual ~MemorySource() = default;
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Release(void* p) = 0;
};

// Host memory (aligned_alloc / free); shared, stateless.
MemorySource& HostMemory();

class Workspace {
 public:
  // `source` must outlive the workspace; null = HostMemory().
  explicit Workspace(size_t initial_bytes = size_t{1} << 20, MemorySource* source = nullptr);
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Returns `count` floats aligned to 64 bytes, valid until the next Reset(). Contents undefined.
  float* Floats(size_t count);
  template <typename T>
  T* Array(size_t count) {
    return reinterpret_cast<T*>(Floats((count * sizeof(T) + sizeof(float) - 1) / sizeof(float)));
  }

  // Forgets every allocation. If the pass needed extra blocks (even ones Rewind has dropped
  // since), they are merged into one block big enough for the whole high-water mark, so later
  // passes stay in a single block.
  void Reset();

  // A point to return to: layers of a forward pass take their scratch after a mark and give it
  // back with Rewind, so a pass needs one layer's scratch, not the sum over all layers.
  struct Mark {
    size_t blocks;
    size_t used_in_last;
    size_t used_total;
  };
  Mark GetMark() const { return {blocks_.size(), used_in_last_, used_total_}; }
  void Rewind(const Mark& mark);

  size_t high_water_bytes() const { return high_water_; }
  size_t capacity_bytes() const;
  // Blocks taken from the heap since construction (tests: a warm workspace takes none).
  size_t blocks_allocated() const { return blocks_allocated_; }

 private:
  struct Release {
    MemorySource* source;
    void operator()(std::byte* p) const { source->Release(p); }
  };
  struct Block {
    std::unique_ptr<std::byte[], Release> data;
    size_t size;
  };
  Block NewBlock(size_t bytes);

  MemorySource* source_;
  std::vector<Block> blocks_;
  size_t used_in_last_ = 0;  // bytes used in blocks_.back()
  size_t used_total_ = 0;
  size_t high_water_ = 0;
  size_t blocks_allocated_ = 0;
  bool grown_ = false;  // a block was added since the last Reset
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_WORKSPACE_H_
