// The hybrid prefix cache: a radix tree over token ids with Marconi's admission and FLOP-aware
// eviction (docs/ARCHITECTURE.md, "Prefix cache").
//
// Each node's edge holds a run of tokens [start, end) and owns the KV pages of those tokens:
// the pages with indices floor(start/P) .. ceil(end/P) − 1 (P = page_tokens). When an edge starts
// in the middle of a page, its first page is its own copy whose leading slots repeat the
// parent's tokens, so the pages of a root→node path, taking at each page index the deepest
// edge's page, form an ordinary block table. A node may own one SSM checkpoint: the recurrent
// state after its edge's last token. For a model with SSM layers a prefix is usable only up to
// the deepest node that has a checkpoint; for a pure-attention model every position is usable.
//
// A request's life:
//   Lookup  (Begin)  returns the usable prefix (its KV pages and checkpoint, pinned until Finish
//                    or Abort) and the positions where prefill must save the SSM state — the
//                    branch point found by speculative insertion (Marconi), or every block for
//                    the vLLM+ baseline.
//   Insert  (Finish) hands the sequence's own KV pages and the saved states to the tree, which
//                    keeps what is new and frees the rest; then evicts down to capacity.
// Eviction candidates are unpinned nodes with at most one child. Evicting a leaf frees its KV
// and checkpoint; evicting a single-child node frees only its checkpoint and merges its KV into
// the child. FLOP-aware eviction scores S(n) = norm(recency) + α·norm(FLOPs saved per byte),
// min-max normalised over the candidates, and finds the minimum with a threshold walk over two
// ordered indexes (by last access and by efficiency), so an eviction touches only the
// candidates it needs, never all nodes.
//
// Not thread-safe: the scheduler owns it.
#ifndef TANDEM_CACHE_PREFIX_CACHE_H_
#define TANDEM_CACHE_PREFIX_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cache/block_allocator.h"
#include "cache/model_spec.h"

namespace tandem::cache {

using TokenId = int32_t;

enum class AdmissionPolicy : uint8_t {
  kBranchAndLast,  // Marconi / SGLang+: the branch point and the last token (≤ 2 states)
  kEveryBlock,     // vLLM+: a state at every block_tokens boundary and at the last token
};

enum class EvictionPolicy : uint8_t {
  kFlopAware,  // Marconi: nodes with ≤ 1 child, S = recency + α·efficiency, hit refreshes
               // only the accessed node
  kLruLeaves,  // SGLang+ / vLLM+: least recently used leaf, a hit refreshes the whole path
};

struct PrefixCacheConfig {
  size_t page_tokens = 16;
  // Bytes of KV pages plus checkpoints the tree may hold; 0 = no limit beyond the allocator.
  size_t capacity_bytes = 0;
  AdmissionPolicy admission = AdmissionPolicy::kBranchAndLast;
  size_t block_tokens = 32;  // kEveryBlock spacing
  EvictionPolicy eviction = EvictionPolicy::kFlopAware;
  double alpha = 0;  // the efficiency weight; an AlphaTuner may change it with set_alpha()
};

struct PrefixCacheStats {
  uint64_t lookups = 0;
  uint64_t lookup_tokens = 0;  // prompt tokens seen by Lookup
  uint64_t hit_tokens = 0;     // usable prefix tokens returned
  double flops_saved = 0;      // prefill FLOPs of the usable prefixes
  uint64_t checkpoints_admitted = 0;
  uint64_t checkpoints_rejected = 0;  // offered but not kept (duplicate, not admissible)
  uint64_t hinted_positions = 0;      // positions Lookup planned only because a hint asked
  uint64_t evictions = 0;             // nodes evicted
  uint64_t leaf_evictions = 0;
  uint64_t intermediate_evictions = 0;  // checkpoint dropped, KV merged into the child
  uint64_t insert_failures = 0;         // no memory for a split even after evicting
  size_t nodes = 0;                     // excluding the root
  size_t kv_pages = 0;                  // held by the tree
  size_t checkpoints = 0;               // held by the tree
  size_t bytes = 0;                     // kv_pages × page bytes + checkpoints × state bytes
  size_t pinned_prefixes = 0;           // PinPrefix pins held
  size_t pinned_bytes = 0;              // of `bytes`, held on pinned prefixes' paths
};

class PrefixCache {
 public:
  using LeaseId = uint64_t;

  struct Hit {
    LeaseId lease = 0;
    // Tokens whose KV and SSM state can be restored: the engine prefills only the rest.
    size_t usable_tokens = 0;
    // The longest token match in the tree (≥ usable_tokens); the part beyond usable_tokens has
    // KV but no checkpoint.
    size_t cached_tokens = 0;
    // The state at usable_tokens (invalid when usable_tokens is 0 or the model has no SSM). It
    // stays the tree's: copy it into the sequence's own SSM block before running from it.
    Handle checkpoint;
    // Block table for [0, usable_tokens): pages with indices 0 .. ceil(usable/P) − 1. They stay
    // the tree's; a partially used last page must be copied before the sequence writes to it.
    std::vector<Handle> kv_pages;
    // Positions in (usable_tokens, prompt length] at which prefill must save the SSM state.
    std::vector<size_t> checkpoint_positions;
  };

  struct Completion {
    // Every token whose KV and state the sequence computed (prompt + decoded).
    absl::Span<const TokenId> tokens;
    // The sequence's own KV pages for page indices floor(usable/P) .. ceil(n/P) − 1, in order.
    // Ownership passes to the cache.
    std::vector<Handle> kv_pages;
    // (position, SSM block holding the state after that many tokens — a copy the engine saved,
    // not the sequence's live state); ownership passes to the cache. Admitted are the positions
    // Lookup asked for and tokens.size() (kEveryBlock also admits block multiples); the rest
    // are freed.
    std::vector<std::pair<size_t, Handle>> checkpoints;
  };

  // `allocator` and `spec` must outlive the cache.
  PrefixCache(const PrefixCacheConfig& config, const ModelSpec& spec, BlockAllocator* allocator);
  ~PrefixCache();  // frees every handle the tree holds and every open lease's pins
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Finds the usable prefix of `prompt`, pins it and plans checkpoints (speculative insertion).
  // `max_usable` caps the usable prefix; an engine that needs the last prompt token's logits
  // passes prompt.size() − 1. `hints` are positions (ascending) where the caller knows later
  // prompts will branch, such as message boundaries of a chat: those in (usable, prompt.size()]
  // that the tree holds no state for join the planned positions (and are admitted at Insert
  // like the branch point), so the first later request that shares the prefix already hits.
  Hit Lookup(absl::Span<const TokenId> prompt, size_t max_usable = SIZE_MAX,
             absl::Span<const size_t> hints = {});
  // Inserts a finished sequence, releases its lease and evicts down to capacity. Always takes
  // ownership of every handle in `done`, even on error. INVALID_ARGUMENT for an unknown lease,
  // tokens that do not extend the looked-up prompt's usable prefix, or a wrong page count.
  // With `pin`, also pins done.tokens (PinPrefix) before evicting, so that the eviction cannot
  // take what was just inserted, and sets `*pin` to the pin's id or to why there is none.
  using PinId = uint64_t;
  absl::Status Insert(LeaseId lease, Completion done, absl::StatusOr<PinId>* pin = nullptr);
  // Releases a lease without inserting anything.
  void Abort(LeaseId lease);

  // Pinned prefixes (Prompt Cache's reusable prompt modules, in the form a hybrid model can
  // reuse: prefixes of the prompt, each with the SSM state at its end). A pinned prefix's path
  // is never evicted, so every later prompt that starts with its tokens restores it, however
  // full the cache gets, until UnpinPrefix. The tree must already hold `tokens` whole, ending
  // at a node with a checkpoint when the model has SSM layers (the engine prefills and inserts
  // it first): FAILED_PRECONDITION otherwise; RESOURCE_EXHAUSTED when an attention-only
  // model's edge must be split and no page can be had for it.
  absl::StatusOr<PinId> PinPrefix(absl::Span<const TokenId> tokens);
  // NOT_FOUND for an id that is not pinned. The prefix becomes evictable like any other.
  absl::Status UnpinPrefix(PinId id);
  // Bytes of KV pages and checkpoints on pinned prefixes' paths, each node counted once.
  size_t pinned_bytes() const;

  // Evicts until `units` units of `pool` have been returned to the allocator or nothing more
  // can be evicted; returns the units freed. The engine calls this when an allocation fails.
  size_t Evict(Pool pool, size_t units);
  // Evicts until the tree holds at most `bytes`.
  void EvictToBytes(size_t bytes);

  double alpha() const { return alpha_; }
  void set_alpha(double alpha) { alpha_ = alpha; }
  // Takes effect at the next Insert (replays of the α tuner bound their copies with it).
  void set_capacity_bytes(size_t bytes) { config_.capacity_bytes = bytes; }
  // Called once, just before the first eviction (the α tuner starts its bootstrap window then).
  void set_first_eviction_callback(std::function<void()> cb) { on_first_eviction_ = std::move(cb); }

  PrefixCacheStats stats() const;
  const PrefixCacheConfig& config() const { return config_; }
  size_t allocator_unit_bytes(Pool pool) const { return allocator_->unit_bytes(pool); }
  // Bytes of KV pages and checkpoints the tree holds.
  size_t bytes() const {
    return stats_.kv_pages * kv_page_bytes_ + stats_.checkpoints * ssm_bytes_;
  }
  uint64_t clock() const { return clock_; }

  // A deep copy for replays (α tuning): same tree, clock and statistics, with fresh handles
  // from `allocator` in place of the pages and checkpoints (no data is copied). Leases and
  // pinned prefixes are not copied and the copy has no pins. `allocator` must outlive the copy.
  // RESOURCE_EXHAUSTED if `allocator` cannot hold the tree (nothing it gave is kept).
  absl::StatusOr<std::unique_ptr<PrefixCache>> Clone(BlockAllocator* allocator) const;

  // Checks every structural invariant; returns the first violation (for tests).
  absl::Status CheckInvariants() const;
  // Compares the eviction choice with a brute-force scan of all candidates (for tests).
  absl::Status CheckVictimChoice() const;

 private:
  using NodeId = uint32_t;
  static constexpr NodeId kRoot = 0;
  static constexpr NodeId kNone = 0xffffffffu;

  struct Node {
    NodeId parent = kNone;
    NodeId first_child = kNone, next_sibling = kNone, prev_sibling = kNone;
    uint32_t num_children = 0;
    uint32_t pins = 0;
    // Of `pins`, those of pinned prefixes (PinPrefix) whose path runs through this node, the
    // ones that end here included.
    uint32_t prefix_pins = 0;
    size_t start = 0;  // absolute position of the edge's first token
    std::vector<TokenId> tokens;
    std::vector<Handle> pages;  // page indices floor(start/P) .. ceil(end/P) − 1
    Handle checkpoint;
    uint64_t last_access = 0;
    double efficiency = 0;
    bool candidate = false;  // indexed in by_time_ / by_efficiency_
    bool live = false;
    size_t end() const { return start + tokens.size(); }
  };

  struct Lease {
    NodeId pinned = kRoot;  // deepest pinned node (usable prefix)
    size_t usable = 0;
    std::vector<size_t> wanted;  // checkpoint positions asked for
  };

  // Walk result: the deepest node whose edge holds matched tokens, and how many of its edge's
  // tokens matched.
  struct Walk {
    NodeId node = kRoot;
    size_t in_edge = 0;  // tokens matched within node's edge (== edge length if fully matched)
    size_t matched = 0;
    NodeId usable_node = kRoot;  // deepest fully matched node that is usable
  };
  Walk WalkPrefix(absl::Span<const TokenId> tokens) const;
  // Lookup's share for `hints`: appends the hinted positions worth a state to `positions` and
  // keeps it sorted and free of duplicates. `path` is `w`'s matched path, deepest node first.
  void AddHintedPositions(size_t prompt_size, size_t usable, const Walk& w,
                          const std::vector<NodeId>& path, absl::Span<const size_t> hints,
                          std::vector<size_t>& positions);

  // Clone's way out when `allocator` runs dry at node `node` after `pages_done` of its pages.
  absl::Status AbandonClone(size_t node, size_t pages_done, const absl::Status& why);

  NodeId NewNode();
  void DeleteNode(NodeId id);
  NodeId FindChild(NodeId parent, TokenId first) const;
  void LinkChild(NodeId parent, NodeId child);
  void UnlinkChild(NodeId child);

  void Pin(NodeId id);
  // With `tidy`, nodes whose last pin goes are removed or merged if they are now useless.
  void Unpin(NodeId id, bool tidy);
  void Touch(NodeId id);  // refresh per the eviction policy
  void SetAccess(NodeId id, uint64_t t);

  // Splits `id` so that a node ends at absolute position `pos` (start < pos < end); returns the
  // upper node, or kNone if no page could be allocated for the lower half.
  NodeId Split(NodeId id, size_t pos);
  // Returns the node ending exactly at absolute position `pos` on the path to `tokens`,
  // splitting an edge if needed; kNone if the path is shorter or a split failed. The walk
  // starts at `from`, a node on that path ending at or before `pos` (the root by default), so
  // ascending positions cost one walk in total.
  NodeId NodeEndingAt(absl::Span<const TokenId> tokens, size_t pos, NodeId from = kRoot);
  // Drops `id`'s checkpoint (if any) and merges its edge into its only child.
  void MergeIntoChild(NodeId id);
  void RemoveLeaf(NodeId id);
  // Removes or merges a node that no longer earns its place (no checkpoint and ≤ 1 child), as
  // long as no lease pins it and no pinned prefix ends at it (pinned prefixes that only pass
  // through go on to its child, which a merge keeps).
  void Tidy(NodeId id);
  // Whether absolute position `pos` of `tokens` lies on a pinned prefix's path short of where
  // any pinned prefix ends: a checkpoint there could never be evicted (the path is pinned), so
  // it is not admitted, and the pinned bytes stay what the pins took.
  bool InsidePinnedPrefix(absl::Span<const TokenId> tokens, size_t pos) const;
  // Whether a pinned prefix ends at node `id`.
  bool PinnedPrefixEndsAt(NodeId id) const;
  bool Usable(const Node& n) const;

  // Candidate index maintenance.
  bool Eligible(const Node& n, NodeId id) const;
  void Reindex(NodeId id);
  void Unindex(NodeId id);
  double Efficiency(const Node& n) const;
  NodeId PickVictim() const;
  // Evicts one node; returns false if there is no candidate.
  bool EvictOne();

  void FreeHandle(Handle h);
  absl::StatusOr<Handle> AllocateKvPage();
  size_t PageIndexBegin(size_t start) const { return start / page_tokens_; }
  size_t PageIndexEnd(size_t end) const { return (end + page_tokens_ - 1) / page_tokens_; }

  PrefixCacheConfig config_;
  const ModelSpec& spec_;
  BlockAllocator* allocator_;
  size_t page_tokens_;
  bool has_kv_;
  bool has_ssm_;
  size_t kv_page_bytes_ = 0;
  size_t ssm_bytes_ = 0;
  double kv_bytes_per_token_ = 0;
  double alpha_ = 0;
  std::function<void()> on_first_eviction_;

  std::vector<Node> nodes_;
  std::vector<NodeId> free_nodes_;
  absl::flat_hash_map<uint64_t, NodeId> children_;  // (parent << 32 | first token) → child
  std::set<std::pair<uint64_t, NodeId>> by_time_;
  std::set<std::pair<double, NodeId>> by_efficiency_;
  absl::flat_hash_map<LeaseId, Lease> leases_;
  LeaseId next_lease_ = 1;
  // PinPrefix's pins: each holds a pin on its node's path, as a lease does. Split keeps a
  // node's id on its lower half, the half that ends where the prefix does.
  absl::flat_hash_map<PinId, NodeId> pinned_prefixes_;
  PinId next_pin_ = 1;
  uint64_t clock_ = 0;
  PrefixCacheStats stats_;
  // Evict() counts the units it frees of this pool.
  size_t freed_units_[kNumPools] = {0, 0};
};

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_PREFIX_CACHE_H_
