// Calls recorded now and run later, in order: a device backend records a pass's launches so that
// at the pass's end it can run them one by one, capture them into a CUDA graph, or run nothing
// and replay a graph captured from an identical earlier pass (kernels/cuda/cuda_ops.h).
//
// The calls live in one arena that is reused from pass to pass, so a warm list allocates nothing.
// That is why a call must be trivially copyable (it captures values: pointers, sizes, argument
// structs, never an owning container): the arena moves it as bytes when it grows, and never
// destroys it.
#ifndef TANDEM_KERNELS_DEFERRED_CALLS_H_
#define TANDEM_KERNELS_DEFERRED_CALLS_H_

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace tandem::kernels {

class DeferredCalls {
 public:
  DeferredCalls() = default;
  DeferredCalls(const DeferredCalls&) = delete;
  DeferredCalls& operator=(const DeferredCalls&) = delete;

  // Stores `call` (callable as `void()`) at the end of the list.
  template <typename Call>
  void Add(const Call& call) {
    static_assert(std::is_trivially_copyable_v<Call>,
                  "a deferred call is moved as bytes: capture values, not owning objects");
    static_assert(alignof(Call) <= kAlign, "a deferred call's alignment exceeds the arena's");
    std::byte* at = Append(sizeof(Call), &Invoke<Call>);
    new (at) Call(call);
  }

  // Runs every call in the order added. The list is kept (a capture that fails can run it again).
  void RunAll() const;
  // Forgets the calls; the arena keeps its memory.
  void Clear() {
    used_ = 0;
    count_ = 0;
  }

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  size_t capacity_bytes() const { return capacity_; }

 private:
  static constexpr size_t kAlign = alignof(std::max_align_t);
  using Invoker = void (*)(const std::byte*);
  // What precedes each call in the arena.
  struct Entry {
    Invoker invoke;
    size_t bytes;  // the call's bytes, rounded up to kAlign
  };

  template <typename Call>
  static void Invoke(const std::byte* at) {
    (*std::launder(reinterpret_cast<const Call*>(at)))();
  }
  static size_t RoundUp(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
  // Room for a call of `bytes` after its entry; grows the arena (by copying its bytes) if needed.
  std::byte* Append(size_t bytes, Invoker invoke);

  std::unique_ptr<std::byte[]> arena_;  // operator new[] aligns it to max_align_t
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t count_ = 0;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_DEFERRED_CALLS_H_
