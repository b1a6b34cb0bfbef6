// Which recorded passes a device backend replays from a captured graph, and the graphs. A pass is
// known by its LaunchSignature. The first time a signature is seen the pass runs eagerly (its
// buffers may still be growing, so a later pass of the same shape may get other addresses); the
// second time it is captured; from then on it is replayed. Only byte-equal signatures match, so
// a replay launches exactly what running the pass's calls would.
//
// The graphs are opaque handles here (a CUDA graph exec on the GPU), destroyed through the
// function given at construction, so this bookkeeping builds and is tested without a device.
#ifndef TANDEM_KERNELS_REPLAY_CACHE_H_
#define TANDEM_KERNELS_REPLAY_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/launch_signature.h"

namespace tandem::kernels {

class ReplayCache {
 public:
  using Graph = void*;
  using DestroyGraph = void (*)(Graph);

  struct Limits {
    // Graphs kept; the least recently used goes first. A server sees about one per decode batch
    // size it runs (up to --max-running, 32 by default) and Hydragen plan, so this covers the
    // steady state of a default server.
    size_t graphs = 64;
    // Signatures remembered without a graph; past it the ones without a graph are forgotten
    // (refused ones only when they and the graphs take more than half of it). Each holds a copy
    // of its signature (tens of KB for a deep model).
    size_t tracked = 256;
  };

  ReplayCache(DestroyGraph destroy, Limits limits);
  explicit ReplayCache(DestroyGraph destroy) : ReplayCache(destroy, Limits()) {}
  ReplayCache(const ReplayCache&) = delete;
  ReplayCache& operator=(const ReplayCache&) = delete;
  ~ReplayCache();

  enum class Plan { kRunEagerly, kCapture, kReplay };
  struct Decision {
    Plan plan = Plan::kRunEagerly;
    Graph graph = nullptr;  // kReplay's
  };
  // What to do with a pass of this signature (and counts it as seen).
  Decision Decide(const LaunchSignature& signature);
  // The graph captured after a kCapture decision; the cache owns it from now on.
  void Store(const LaunchSignature& signature, Graph graph);
  // A capture of this signature failed, or its graph failed to launch: run it eagerly from now
  // on (its graph, if any, destroyed), without trying again.
  void Refuse(const LaunchSignature& signature);
  // Destroys every graph and forgets every signature (the addresses they name may be reused).
  void Clear();

  size_t graphs() const { return graphs_; }
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

 private:
  struct Entry {
    std::vector<std::byte> signature;
    int64_t seen = 0;
    Graph graph = nullptr;
    bool refused = false;
    uint64_t last_used = 0;
  };
  // The entry with these bytes (whose Hash() is `hash`), or null.
  Entry* Find(const LaunchSignature& signature, uint64_t hash);
  void ForgetUncaptured();
  void EvictLeastRecentlyUsedGraph();

  DestroyGraph destroy_;
  Limits limits_;
  std::unordered_map<uint64_t, std::vector<Entry>> entries_;  // by LaunchSignature::Hash
  size_t tracked_ = 0;
  size_t graphs_ = 0;
  uint64_t clock_ = 0;
  int64_t replays_ = 0;
  int64_t captures_ = 0;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_REPLAY_CACHE_H_
