// Giving freed heap memory back to the operating system once the engine has gone quiet.
//
// glibc's malloc keeps memory freed by a thread in that thread's arena for reuse, returning
// only the tail of an arena past its trim threshold; a busy engine's loop thread and the α
// tuner's replay threads therefore keep their high-water marks resident while the server
// idles. Measured after the fix to the workspace churn (docs/BENCHMARKS.md, "Memory under
// sustained load"): 25 of the loop arena's 37 MB were free, and malloc_trim returned 16 MB of
// it; before that fix it returned 240 MB.
#ifndef TANDEM_ENGINE_HEAP_TRIM_H_
#define TANDEM_ENGINE_HEAP_TRIM_H_

namespace tandem::engine {

// Returns the free pages of every malloc arena to the OS (glibc's malloc_trim); true if any
// memory was released. A no-op returning false where the C library has no such call.
bool ReturnFreeHeapToOs();

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_HEAP_TRIM_H_
