#include "cache/prefix_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache/check.h"

namespace tandem::cache {
namespace {

uint64_t ChildKey(uint32_t parent, TokenId first) {
  return (uint64_t{parent} << 32) | static_cast<uint32_t>(first);
}

double Normalize(double v, double lo, double hi) { return hi > lo ? (v - lo) / (hi - lo) : 1.0; }

}  // namespace

PrefixCache::PrefixCache(const PrefixCacheConfig& config, const ModelSpec& spec,
                         BlockAllocator* allocator)
    : config_(config),
      spec_(spec),
      allocator_(allocator),
      page_tokens_(std::max<size_t>(1, config.page_tokens)),
      has_kv_(spec.has_attention()),
      has_ssm_(spec.has_ssm()),
      alpha_(config.alpha) {
  if (config_.block_tokens == 0) config_.block_tokens = 1;
  kv_page_bytes_ = has_kv_ ? allocator_->unit_bytes(Pool::kKvPage) : 0;
  ssm_bytes_ = has_ssm_ ? allocator_->unit_bytes(Pool::kSsmBlock) : 0;
  kv_bytes_per_token_ = double(spec.kv_bytes_per_token());
  nodes_.emplace_back();
  nodes_[kRoot].live = true;
}

PrefixCache::~PrefixCache() {
  for (Node& n : nodes_) {
    if (!n.live) continue;
    for (Handle h : n.pages) allocator_->Free(h);
    if (n.checkpoint.valid()) allocator_->Free(n.checkpoint);
  }
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.nodes = nodes_.size() - free_nodes_.size() - 1;
  s.bytes = bytes();
  s.pinned_prefixes = pinned_prefixes_.size();
  s.pinned_bytes = pinned_bytes();
  return s;
}

absl::StatusOr<std::unique_ptr<PrefixCache>> PrefixCache::Clone(BlockAllocator* allocator) const {
  auto copy = std::make_unique<PrefixCache>(config_, spec_, allocator);
  copy->alpha_ = alpha_;
  copy->nodes_ = nodes_;
  copy->free_nodes_ = free_nodes_;
  copy->children_ = children_;
  copy->clock_ = clock_;
  copy->stats_ = stats_;
  copy->next_lease_ = next_lease_;
  copy->next_pin_ = next_pin_;
  for (size_t i = 0; i < copy->nodes_.size(); ++i) {
    Node& n = copy->nodes_[i];
    n.pins = 0;  // the leases' go; the pinned prefixes' are taken again below
    n.candidate = false;
    if (!n.live) continue;
    for (size_t p = 0; p < n.pages.size(); ++p) {
      absl::StatusOr<Handle> h = allocator->Allocate(Pool::kKvPage);
      if (!h.ok()) return copy->AbandonClone(i, p, h.status());
      n.pages[p] = *h;
    }
    if (n.checkpoint.valid()) {
      absl::StatusOr<Handle> h = allocator->Allocate(Pool::kSsmBlock);
      if (!h.ok()) return copy->AbandonClone(i, n.pages.size(), h.status());
      n.checkpoint = *h;
    }
  }
  // Replays must not evict what the cache itself never can.
  copy->pinned_prefixes_ = pinned_prefixes_;
  for (const auto& [pin, node] : pinned_prefixes_) copy->Pin(node);
  for (NodeId id = 0; id < copy->nodes_.size(); ++id) {
    if (copy->nodes_[id].live) copy->Reindex(id);
  }
  return copy;
}

absl::Status PrefixCache::AbandonClone(size_t node, size_t pages_done, const absl::Status& why) {
  // Nodes before `node` (and its first `pages_done` pages) hold this copy's handles, the rest
  // still the original's: forget the latter, so the destructor frees only what the copy took.
  for (size_t i = node; i < nodes_.size(); ++i) {
    nodes_[i].pages.resize(i == node ? pages_done : 0);
    nodes_[i].checkpoint = Handle();
  }
  return absl::ResourceExhaustedError(absl::StrCat("copying the prefix cache: ", why.message()));
}

// ---- Tree plumbing ------------------------------------------------------------------------

PrefixCache::NodeId PrefixCache::NewNode() {
  NodeId id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[id];
  n.parent = n.first_child = n.next_sibling = n.prev_sibling = kNone;
  n.num_children = n.pins = n.prefix_pins = 0;
  n.start = 0;
  n.tokens.clear();
  n.pages.clear();
  n.checkpoint = Handle();
  n.last_access = 0;
  n.efficiency = 0;
  n.candidate = false;
  n.live = true;
  return id;
}

void PrefixCache::DeleteNode(NodeId id) {
  Unindex(id);
  Node& n = nodes_[id];
  CACHE_DCHECK(!n.candidate && n.num_children == 0 && n.parent == kNone);
  n.live = false;
  // Give the buffers back rather than clear them: a recycled slot would otherwise keep the
  // capacity of the longest edge it ever held, so the tree's heap would track its history
  // instead of its contents.
  std::vector<TokenId>().swap(n.tokens);
  std::vector<Handle>().swap(n.pages);
  free_nodes_.push_back(id);
}

PrefixCache::NodeId PrefixCache::FindChild(NodeId parent, TokenId first) const {
  auto it = children_.find(ChildKey(parent, first));
  return it == children_.end() ? kNone : it->second;
}

void PrefixCache::LinkChild(NodeId parent, NodeId child) {
  Node& c = nodes_[child];
  Node& p = nodes_[parent];
  c.parent = parent;
  c.prev_sibling = kNone;
  c.next_sibling = p.first_child;
  if (p.first_child != kNone) nodes_[p.first_child].prev_sibling = child;
  p.first_child = child;
  ++p.num_children;
  const bool inserted = children_.emplace(ChildKey(parent, c.tokens.front()), child).second;
  CACHE_CHECK(inserted) << "two children of node " << parent << " start with one token";
  Reindex(parent);
}

void PrefixCache::UnlinkChild(NodeId child) {
  Node& c = nodes_[child];
  const NodeId parent = c.parent;
  Node& p = nodes_[parent];
  children_.erase(ChildKey(parent, c.tokens.front()));
  if (c.prev_sibling != kNone) {
    nodes_[c.prev_sibling].next_sibling = c.next_sibling;
  } else {
    p.first_child = c.next_sibling;
  }
  if (c.next_sibling != kNone) nodes_[c.next_sibling].prev_sibling = c.prev_sibling;
  c.prev_sibling = c.next_sibling = c.parent = kNone;
  --p.num_children;
  Reindex(parent);
}

void PrefixCache::Pin(NodeId id) {
  for (NodeId cur = id; cur != kNone; cur = nodes_[cur].parent) {
    if (nodes_[cur].pins++ == 0) Unindex(cur);
  }
}

void PrefixCache::Unpin(NodeId id, bool tidy) {
  // Deepest first, so that tidying a child happens before its parent is looked at.
  std::vector<NodeId> released;
  for (NodeId cur = id; cur != kNone; cur = nodes_[cur].parent) {
    CACHE_CHECK(nodes_[cur].pins > 0) << "unpinning node " << cur << " that is not pinned";
    if (--nodes_[cur].pins == 0) {
      Reindex(cur);
      released.push_back(cur);
    } else if (nodes_[cur].pins == nodes_[cur].prefix_pins) {
      released.push_back(cur);  // only pinned prefixes pass through now: Tidy may merge it
    }
  }
  if (tidy) {
    for (NodeId r : released) Tidy(r);
  }
}

void PrefixCache::SetAccess(NodeId id, uint64_t t) {
  if (id == kRoot) return;
  Node& n = nodes_[id];
  if (n.last_access == t) return;
  const bool was = n.candidate;
  if (was) Unindex(id);
  n.last_access = t;
  if (was) Reindex(id);
}

void PrefixCache::FreeHandle(Handle h) {
  allocator_->Free(h);
  ++freed_units_[int(h.pool())];
}

absl::StatusOr<Handle> PrefixCache::AllocateKvPage() {
  while (true) {
    absl::StatusOr<Handle> h = allocator_->Allocate(Pool::kKvPage);
    if (h.ok() || !EvictOne()) return h;
  }
}

bool PrefixCache::Usable(const Node& n) const { return !has_ssm_ || n.checkpoint.valid(); }

// ---- Structural operations ----------------------------------------------------------------

PrefixCache::NodeId PrefixCache::Split(NodeId id, size_t pos) {
  CACHE_DCHECK(pos > nodes_[id].start && pos < nodes_[id].end());
  Handle copy;
  if (has_kv_ && pos % page_tokens_ != 0) {
    // The page holding `pos` now serves both halves: the upper half keeps it and the lower
    // half gets a copy. Pin the node so the eviction an allocation may trigger spares it.
    Pin(id);
    absl::StatusOr<Handle> h = AllocateKvPage();
    Unpin(id, /*tidy=*/false);
    if (!h.ok()) return kNone;
    copy = *h;
    const Node& x = nodes_[id];
    const Handle shared = x.pages[PageIndexBegin(pos) - PageIndexBegin(x.start)];
    std::byte* dst = allocator_->Resolve(copy);
    const std::byte* src = allocator_->Resolve(shared);
    if (dst != nullptr && src != nullptr && !allocator_->CopyBytes(dst, src, kv_page_bytes_).ok()) {
      allocator_->Free(copy);  // a failed device copy leaves the tree unsplit, like a full pool
      return kNone;
    }
    ++stats_.kv_pages;
  }
  const NodeId u = NewNode();
  Node& x = nodes_[id];
  Node& up = nodes_[u];
  const NodeId parent = x.parent;
  const bool x_candidate = x.candidate;
  if (x_candidate) Unindex(id);
  UnlinkChild(id);
  const size_t k = pos - x.start;
  up.start = x.start;
  up.tokens.assign(x.tokens.begin(), x.tokens.begin() + k);
  x.tokens.erase(x.tokens.begin(), x.tokens.begin() + k);
  if (has_kv_) {
    const size_t upper_pages = PageIndexEnd(pos) - PageIndexBegin(up.start);
    const size_t dropped = PageIndexBegin(pos) - PageIndexBegin(up.start);
    up.pages.assign(x.pages.begin(), x.pages.begin() + upper_pages);
    x.pages.erase(x.pages.begin(), x.pages.begin() + dropped);
    if (copy.valid()) x.pages.front() = copy;
  }
  x.start = pos;
  up.pins = x.pins;
  up.prefix_pins = x.prefix_pins;
  up.last_access = x.last_access;
  LinkChild(parent, u);
  LinkChild(u, id);
  Reindex(u);
  Reindex(id);
  return u;
}

PrefixCache::NodeId PrefixCache::NodeEndingAt(absl::Span<const TokenId> tokens, size_t pos,
                                              NodeId from) {
  if (pos == 0 || pos > tokens.size()) return pos == 0 ? kRoot : kNone;
  NodeId cur = from;
  size_t at = nodes_[from].end();
  if (at > pos) {
    cur = kRoot;
    at = 0;
  }
  if (at == pos) return cur;
  while (at < pos) {
    const NodeId c = FindChild(cur, tokens[at]);
    if (c == kNone) return kNone;
    const Node& n = nodes_[c];
    const size_t len = std::min(n.tokens.size(), pos - at);
    for (size_t k = 1; k < len; ++k) {
      if (n.tokens[k] != tokens[at + k]) return kNone;
    }
    if (n.end() == pos) return c;
    if (n.end() > pos) return Split(c, pos);
    at = n.end();
    cur = c;
  }
  return kNone;
}

void PrefixCache::MergeIntoChild(NodeId id) {
  Node& x = nodes_[id];
  // No pin ends here: every pin of x is its child's too, and stays with it.
  CACHE_DCHECK(x.num_children == 1 && x.pins == nodes_[x.first_child].pins && id != kRoot);
  const NodeId cid = x.first_child;
  const NodeId parent = x.parent;
  if (x.checkpoint.valid()) {
    FreeHandle(x.checkpoint);
    x.checkpoint = Handle();
    --stats_.checkpoints;
  }
  UnlinkChild(cid);
  UnlinkChild(id);
  Unindex(id);  // after the unlinks, which re-index the parents
  Unindex(cid);
  Node& c = nodes_[cid];
  if (has_kv_) {
    // A child starting mid-page has its own copy of the shared page; keep that one.
    if (c.start % page_tokens_ != 0) {
      FreeHandle(x.pages.back());
      x.pages.pop_back();
      --stats_.kv_pages;
    }
    c.pages.insert(c.pages.begin(), x.pages.begin(), x.pages.end());
  }
  c.tokens.insert(c.tokens.begin(), x.tokens.begin(), x.tokens.end());
  c.start = x.start;
  DeleteNode(id);
  LinkChild(parent, cid);
  Reindex(cid);
}

void PrefixCache::RemoveLeaf(NodeId id) {
  Node& n = nodes_[id];
  CACHE_DCHECK(n.num_children == 0 && n.pins == 0 && id != kRoot);
  Unindex(id);
  for (Handle h : n.pages) FreeHandle(h);
  stats_.kv_pages -= n.pages.size();
  n.pages.clear();
  if (n.checkpoint.valid()) {
    FreeHandle(n.checkpoint);
    n.checkpoint = Handle();
    --stats_.checkpoints;
  }
  const NodeId parent = n.parent;
  UnlinkChild(id);
  DeleteNode(id);
  Tidy(parent);
}

void PrefixCache::Tidy(NodeId id) {
  if (id == kRoot || id == kNone || !nodes_[id].live) return;
  const Node& n = nodes_[id];
  if (n.checkpoint.valid()) return;
  if (n.num_children == 0 && n.pins == 0 && has_ssm_) {
    RemoveLeaf(id);  // KV without a state to resume from is useless to a hybrid model
  } else if (n.num_children == 1 && n.pins == nodes_[n.first_child].pins &&
             n.pins == n.prefix_pins) {
    // No checkpoint to keep: just path compression. Pinned prefixes' pins may pass through (a
    // split inside one, made for a branch since evicted, goes back this way), but no lease's:
    // its block table may hold the page a merge frees (Split leaves the original page with the
    // upper half).
    MergeIntoChild(id);
  }
}

// ---- Candidate index ----------------------------------------------------------------------

bool PrefixCache::Eligible(const Node& n, NodeId id) const {
  if (id == kRoot || !n.live || n.pins > 0) return false;
  if (has_ssm_ && !n.checkpoint.valid()) return false;
  if (n.num_children == 0) return true;
  // An intermediate node is worth evicting only for its checkpoint, and only under Marconi.
  return n.num_children == 1 && has_ssm_ && config_.eviction == EvictionPolicy::kFlopAware;
}

double PrefixCache::Efficiency(const Node& n) const {
  const double saved = spec_.PrefillFlops(n.start, n.end());
  const double held = kv_bytes_per_token_ * double(n.end()) + double(has_ssm_ ? ssm_bytes_ : 0);
  return held > 0 ? saved / held : 0;
}

void PrefixCache::Unindex(NodeId id) {
  Node& n = nodes_[id];
  if (!n.candidate) return;
  by_time_.erase({n.last_access, id});
  if (config_.eviction == EvictionPolicy::kFlopAware) by_efficiency_.erase({n.efficiency, id});
  n.candidate = false;
}

void PrefixCache::Reindex(NodeId id) {
  Unindex(id);
  Node& n = nodes_[id];
  if (!Eligible(n, id)) return;
  n.candidate = true;
  by_time_.insert({n.last_access, id});
  if (config_.eviction == EvictionPolicy::kFlopAware) {
    n.efficiency = Efficiency(n);
    by_efficiency_.insert({n.efficiency, id});
  }
}

PrefixCache::NodeId PrefixCache::PickVictim() const {
  if (by_time_.empty()) return kNone;
  if (config_.eviction == EvictionPolicy::kLruLeaves) return by_time_.begin()->second;
  // Marconi's recency is 1 / (now − last access); the +1 keeps it finite for a node touched now.
  const double now = double(clock_) + 1;
  auto recency = [&](uint64_t t) { return 1.0 / (now - double(t)); };
  const double r_lo = recency(by_time_.begin()->first);
  const double r_hi = recency(by_time_.rbegin()->first);
  const double e_lo = by_efficiency_.begin()->first;
  const double e_hi = by_efficiency_.rbegin()->first;
  const double alpha = alpha_;
  auto score = [&](NodeId id) {
    const Node& n = nodes_[id];
    return Normalize(recency(n.last_access), r_lo, r_hi) +
           alpha * Normalize(n.efficiency, e_lo, e_hi);
  };
  // Threshold walk over the two orders: every unseen candidate scores at least the normalised
  // recency at the time cursor plus α times the normalised efficiency at the efficiency cursor.
  double best = std::numeric_limits<double>::infinity();
  NodeId victim = kNone;
  auto consider = [&](NodeId id) {
    const double s = score(id);
    if (s < best || (s == best && id < victim)) {
      best = s;
      victim = id;
    }
  };
  auto ti = by_time_.begin();
  auto ei = by_efficiency_.begin();
  const bool use_efficiency = alpha > 0;
  while (ti != by_time_.end()) {
    consider(ti->second);
    ++ti;
    if (use_efficiency && ei != by_efficiency_.end()) {
      consider(ei->second);
      ++ei;
    }
    if (ti == by_time_.end()) break;
    double bound = Normalize(recency(ti->first), r_lo, r_hi);
    if (use_efficiency) {
      bound += ei == by_efficiency_.end() ? std::numeric_limits<double>::infinity()
                                          : alpha * Normalize(ei->first, e_lo, e_hi);
    }
    if (best <= bound) break;
  }
  return victim;
}

bool PrefixCache::EvictOne() {
  const NodeId victim = PickVictim();
  if (victim == kNone) return false;
  if (stats_.evictions == 0 && on_first_eviction_) on_first_eviction_();
  ++stats_.evictions;
  if (nodes_[victim].num_children == 0) {
    ++stats_.leaf_evictions;
    RemoveLeaf(victim);
  } else {
    ++stats_.intermediate_evictions;
    MergeIntoChild(victim);
  }
  return true;
}

size_t PrefixCache::Evict(Pool pool, size_t units) {
  const size_t before = freed_units_[int(pool)];
  while (freed_units_[int(pool)] - before < units && EvictOne()) {
  }
  return freed_units_[int(pool)] - before;
}

void PrefixCache::EvictToBytes(size_t limit) {
  while (bytes() > limit && EvictOne()) {
  }
}

// ---- Lookup and insert --------------------------------------------------------------------

PrefixCache::Walk PrefixCache::WalkPrefix(absl::Span<const TokenId> tokens) const {
  Walk w;
  NodeId cur = kRoot;
  size_t pos = 0;
  while (pos < tokens.size()) {
    const NodeId c = FindChild(cur, tokens[pos]);
    if (c == kNone) break;
    const Node& n = nodes_[c];
    const size_t len = n.tokens.size();
    size_t k = 1;
    while (k < len && pos + k < tokens.size() && n.tokens[k] == tokens[pos + k]) ++k;
    w.node = c;
    w.in_edge = k;
    pos += k;
    if (k < len) break;
    cur = c;
  }
  w.matched = pos;
  return w;
}

PrefixCache::Hit PrefixCache::Lookup(absl::Span<const TokenId> prompt, size_t max_usable,
                                     absl::Span<const size_t> hints) {
  ++clock_;
  ++stats_.lookups;
  stats_.lookup_tokens += prompt.size();
  max_usable = std::min(max_usable, prompt.size());
  const Walk w = WalkPrefix(prompt);
  // The matched path, deepest node first.
  std::vector<NodeId> path;
  for (NodeId cur = w.node; cur != kRoot; cur = nodes_[cur].parent) path.push_back(cur);

  // The usable node: the deepest fully matched usable node ending within max_usable; for a
  // pure-attention model, the node holding the last usable matched token.
  NodeId pinned = kRoot;
  size_t usable = 0;
  {
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const Node& n = nodes_[*it];
      const bool fully = *it != w.node || w.in_edge == n.tokens.size();
      if (!has_ssm_) {
        const size_t reach = std::min(fully ? n.end() : n.start + w.in_edge, max_usable);
        if (reach > n.start) {
          pinned = *it;
          usable = reach;
        }
      } else if (fully && n.end() <= max_usable && n.checkpoint.valid()) {
        pinned = *it;
        usable = n.end();
      }
    }
  }

  Hit hit;
  hit.lease = next_lease_++;
  hit.usable_tokens = usable;
  hit.cached_tokens = w.matched;
  if (pinned != kRoot) {
    Pin(pinned);
    hit.checkpoint = has_ssm_ ? nodes_[pinned].checkpoint : Handle();
    if (config_.eviction == EvictionPolicy::kFlopAware) {
      SetAccess(pinned, clock_);  // a hit refreshes only the accessed node
    } else {
      for (NodeId cur = pinned; cur != kRoot; cur = nodes_[cur].parent) SetAccess(cur, clock_);
    }
    if (has_kv_) {
      hit.kv_pages.resize(PageIndexEnd(usable));
      for (NodeId cur = pinned; cur != kRoot; cur = nodes_[cur].parent) {
        const Node& n = nodes_[cur];
        const size_t first = PageIndexBegin(n.start);
        const size_t last = std::min(PageIndexEnd(n.end()), hit.kv_pages.size());
        for (size_t i = first; i < last; ++i) {
          // Walking upwards: a deeper edge's copy of a shared page wins.
          if (!hit.kv_pages[i].valid()) hit.kv_pages[i] = n.pages[i - first];
        }
      }
    }
  }
  if (has_ssm_) {
    if (config_.admission == AdmissionPolicy::kEveryBlock) {
      const size_t b = config_.block_tokens;
      for (size_t p = (usable / b + 1) * b; p <= prompt.size(); p += b) {
        hit.checkpoint_positions.push_back(p);
      }
    } else if (w.matched > usable) {
      // A branch point the tree already has but without a state: two sequences that shared a
      // prefix ran at the same time, neither saw the other at lookup, and the second one's
      // insertion split the first one's edge. Nothing would ever checkpoint that node, and the
      // prefix would stay unusable for every later request, so this one repairs it.
      NodeId bare_branch = kNone;
      for (NodeId cur = w.node; cur != kRoot; cur = nodes_[cur].parent) {
        const Node& n = nodes_[cur];
        const bool fully = cur != w.node || w.in_edge == n.tokens.size();
        if (n.end() <= usable) break;
        if (fully && n.num_children >= 2 && !n.checkpoint.valid() && n.end() < w.matched) {
          bare_branch = cur;
          break;
        }
      }
      if (bare_branch != kNone) hit.checkpoint_positions.push_back(nodes_[bare_branch].end());
      // Speculative insertion: this prompt leaves the tree at w.matched, inside an edge or at
      // a node without a state; that branch point is worth a checkpoint.
      const Node& n = nodes_[w.node];
      const bool at_state = w.in_edge == n.tokens.size() && n.checkpoint.valid();
      if (!at_state) hit.checkpoint_positions.push_back(w.matched);
    }
    AddHintedPositions(prompt.size(), usable, w, path, hints, hit.checkpoint_positions);
  }
  stats_.hit_tokens += usable;
  stats_.flops_saved += spec_.PrefillFlops(0, usable);
  leases_.emplace(hit.lease, Lease{pinned, usable, hit.checkpoint_positions});
  return hit;
}

void PrefixCache::AddHintedPositions(size_t prompt_size, size_t usable, const Walk& w,
                                     const std::vector<NodeId>& path,
                                     absl::Span<const size_t> hints,
                                     std::vector<size_t>& positions) {
  if (hints.empty()) return;
  // A position the matched path already ends a checkpointed node at needs no second state.
  auto checkpointed = [&](size_t pos) {
    for (NodeId id : path) {
      const Node& n = nodes_[id];
      const bool fully = id != w.node || w.in_edge == n.tokens.size();
      if (n.end() == pos) return fully && n.checkpoint.valid();
      if (n.end() < pos) return false;
    }
    return false;
  };
  const size_t planned = positions.size();
  for (size_t pos : hints) {
    if (pos <= usable || pos > prompt_size || checkpointed(pos)) continue;
    positions.push_back(pos);
  }
  if (positions.size() == planned) return;
  stats_.hinted_positions += positions.size() - planned;
  std::sort(positions.begin(), positions.end());
  const auto last = std::unique(positions.begin(), positions.end());
  stats_.hinted_positions -= static_cast<size_t>(positions.end() - last);
  positions.erase(last, positions.end());
}

void PrefixCache::Abort(LeaseId lease) {
  auto it = leases_.find(lease);
  if (it == leases_.end()) return;
  const NodeId pinned = it->second.pinned;
  leases_.erase(it);
  if (pinned != kRoot) Unpin(pinned, /*tidy=*/true);
}

absl::Status PrefixCache::Insert(LeaseId lease_id, Completion done, absl::StatusOr<PinId>* pin) {
  if (pin != nullptr) *pin = absl::FailedPreconditionError("the completion was refused");
  auto free_all = [&](size_t first_page) {
    for (size_t i = first_page; i < done.kv_pages.size(); ++i) FreeHandle(done.kv_pages[i]);
    for (auto& [pos, h] : done.checkpoints) {
      if (h.valid()) FreeHandle(h);
    }
    done.checkpoints.clear();
  };
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) {
    free_all(0);
    return absl::InvalidArgumentError(absl::StrCat("unknown lease ", lease_id));
  }
  const Lease lease = std::move(it->second);
  leases_.erase(it);
  absl::Span<const TokenId> tokens = done.tokens;
  const size_t n = tokens.size();
  ++clock_;

  absl::Status error;
  const size_t want_pages =
      has_kv_ && n > lease.usable ? PageIndexEnd(n) - PageIndexBegin(lease.usable) : 0;
  Walk w = WalkPrefix(tokens);
  if (n < lease.usable || w.matched < lease.usable) {
    error = absl::InvalidArgumentError(absl::StrCat("insert: the ", n, " tokens do not extend the ",
                                                    lease.usable, "-token usable prefix"));
  } else if (done.kv_pages.size() != want_pages) {
    error = absl::InvalidArgumentError(absl::StrCat("insert: expected ", want_pages,
                                                    " KV pages for tokens [", lease.usable, ", ", n,
                                                    "), got ", done.kv_pages.size()));
  }
  if (!error.ok()) {
    free_all(0);
    if (lease.pinned != kRoot) Unpin(lease.pinned, /*tidy=*/true);
    return error;
  }

  // 1. The new leaf for tokens the tree lacks.
  NodeId leaf = kNone;
  size_t pages_used_from = done.kv_pages.size();  // pages [0, this) are duplicates to free
  const size_t m = w.matched;
  if (m < n) {
    NodeId attach = w.node;
    if (w.node != kRoot && w.in_edge < nodes_[w.node].tokens.size()) {
      attach = Split(w.node, nodes_[w.node].start + w.in_edge);
    }
    if (attach == kNone) {
      ++stats_.insert_failures;
      free_all(0);
      if (lease.pinned != kRoot) Unpin(lease.pinned, /*tidy=*/true);
      if (pin != nullptr) {
        *pin = absl::ResourceExhaustedError("no KV page for the split that would keep the prefix");
      }
      return absl::OkStatus();
    }
    leaf = NewNode();
    Node& l = nodes_[leaf];
    l.start = m;
    l.tokens.assign(tokens.begin() + m, tokens.end());
    if (has_kv_) {
      pages_used_from = PageIndexBegin(m) - PageIndexBegin(lease.usable);
      l.pages.assign(done.kv_pages.begin() + pages_used_from, done.kv_pages.end());
      stats_.kv_pages += l.pages.size();
    }
    l.last_access = clock_;
    LinkChild(attach, leaf);
    Reindex(leaf);
    Pin(leaf);  // until the checkpoints are attached
  }
  for (size_t i = 0; i < pages_used_from; ++i) FreeHandle(done.kv_pages[i]);
  if (leaf == kNone) {
    // Everything was cached already: pin the path so checkpoint splits cannot evict it.
    leaf = NodeEndingAt(tokens, n);
    if (leaf != kNone && leaf != kRoot) {
      Pin(leaf);
    } else {
      leaf = kNone;
    }
  }

  // 2. Checkpoints: the admitted positions get a node (splitting an edge if needed).
  std::sort(done.checkpoints.begin(), done.checkpoints.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // With the new path pinned, nodes found so far stay on it: resume each walk there.
  NodeId hint = kRoot;
  for (auto& [pos, h] : done.checkpoints) {
    if (!h.valid()) continue;
    // A state inside a pinned prefix would be pinned with it: only the one a pin asks for.
    const bool wanted =
        (pos == n ||
         std::find(lease.wanted.begin(), lease.wanted.end(), pos) != lease.wanted.end() ||
         (config_.admission == AdmissionPolicy::kEveryBlock && pos % config_.block_tokens == 0)) &&
        ((pin != nullptr && pos == n) || !InsidePinnedPrefix(tokens, pos));
    NodeId node = has_ssm_ && wanted && pos > 0 && pos <= n
                      ? NodeEndingAt(tokens, pos, leaf != kNone ? hint : kRoot)
                      : kNone;
    if (node != kNone) hint = node;
    if (node == kNone || node == kRoot || nodes_[node].checkpoint.valid()) {
      ++stats_.checkpoints_rejected;
      FreeHandle(h);
    } else {
      nodes_[node].checkpoint = h;
      ++stats_.checkpoints;
      ++stats_.checkpoints_admitted;
      SetAccess(node, clock_);
      Reindex(node);
      Tidy(node);
    }
    h = Handle();
  }

  // 3. Refresh, pin what was asked to be, release the insertion's pins, drop what is useless,
  // and make room (never at the new pinned prefix's expense).
  if (config_.eviction == EvictionPolicy::kLruLeaves && leaf != kNone) {
    for (NodeId cur = leaf; cur != kRoot; cur = nodes_[cur].parent) SetAccess(cur, clock_);
  }
  if (pin != nullptr) *pin = PinPrefix(tokens);
  if (leaf != kNone) Unpin(leaf, /*tidy=*/true);
  if (lease.pinned != kRoot) Unpin(lease.pinned, /*tidy=*/true);
  if (config_.capacity_bytes > 0) EvictToBytes(config_.capacity_bytes);
  return absl::OkStatus();
}

absl::Status PrefixCache::CheckVictimChoice() const {
  const NodeId picked = PickVictim();
  if (by_time_.empty()) {
    return picked == kNone ? absl::OkStatus() : absl::InternalError("victim without candidates");
  }
  NodeId best = kNone;
  if (config_.eviction == EvictionPolicy::kLruLeaves) {
    best = by_time_.begin()->second;
  } else {
    const double now = double(clock_) + 1;
    double r_lo = std::numeric_limits<double>::infinity(), r_hi = -r_lo, e_lo = r_lo, e_hi = -r_lo;
    for (NodeId id = 0; id < nodes_.size(); ++id) {
      const Node& n = nodes_[id];
      if (!n.candidate) continue;
      const double r = 1.0 / (now - double(n.last_access));
      r_lo = std::min(r_lo, r);
      r_hi = std::max(r_hi, r);
      e_lo = std::min(e_lo, n.efficiency);
      e_hi = std::max(e_hi, n.efficiency);
    }
    double best_score = std::numeric_limits<double>::infinity();
    for (NodeId id = 0; id < nodes_.size(); ++id) {
      const Node& n = nodes_[id];
      if (!n.candidate) continue;
      const double s = Normalize(1.0 / (now - double(n.last_access)), r_lo, r_hi) +
                       alpha_ * Normalize(n.efficiency, e_lo, e_hi);
      if (s < best_score) {
        best_score = s;
        best = id;
      }
    }
    if (picked != best) {
      // Ties may resolve differently; only a strictly better candidate is an error.
      const Node& p = nodes_[picked];
      const double ps = Normalize(1.0 / (now - double(p.last_access)), r_lo, r_hi) +
                        alpha_ * Normalize(p.efficiency, e_lo, e_hi);
      if (ps > best_score + 1e-12) {
        return absl::InternalError(absl::StrCat("picked node ", picked, " (score ", ps,
                                                ") but node ", best, " scores ", best_score));
      }
      return absl::OkStatus();
    }
  }
  return picked == best ? absl::OkStatus()
                        : absl::InternalError(absl::StrCat("picked ", picked, " not ", best));
}

// ---- Invariants ---------------------------------------------------------------------------

absl::Status PrefixCache::CheckInvariants() const {
  auto fail = [](NodeId id, const std::string& what) {
    return absl::InternalError(absl::StrCat("node ", id, ": ", what));
  };
  std::vector<uint32_t> expected_pins(nodes_.size(), 0);
  for (const auto& [id, lease] : leases_) {
    if (lease.pinned == kRoot) continue;  // an empty prefix pins nothing
    for (NodeId cur = lease.pinned; cur != kNone; cur = nodes_[cur].parent) ++expected_pins[cur];
  }
  std::vector<uint32_t> expected_prefix_pins(nodes_.size(), 0);
  for (const auto& [pin, node] : pinned_prefixes_) {
    if (node >= nodes_.size() || !nodes_[node].live || node == kRoot) {
      return absl::InternalError(absl::StrCat("pinned prefix ", pin, ": node ", node, " is gone"));
    }
    if (has_ssm_ && !nodes_[node].checkpoint.valid()) {
      return absl::InternalError(absl::StrCat("pinned prefix ", pin, " has no state"));
    }
    for (NodeId cur = node; cur != kNone; cur = nodes_[cur].parent) {
      ++expected_pins[cur];
      ++expected_prefix_pins[cur];
    }
  }
  absl::flat_hash_set<uint32_t> handles;
  size_t pages = 0, checkpoints = 0, candidates = 0;
  const Node& root = nodes_[kRoot];
  if (!root.tokens.empty() || !root.pages.empty() || root.checkpoint.valid()) {
    return fail(kRoot, "the root holds state");
  }
  for (NodeId id = 0; id < nodes_.size(); ++id) {
    const Node& n = nodes_[id];
    if (!n.live) continue;
    if (n.prefix_pins != expected_prefix_pins[id]) {
      return fail(id, absl::StrCat("prefix pins ", n.prefix_pins, " != pinned prefixes' ",
                                   expected_prefix_pins[id]));
    }
    if (n.pins != expected_pins[id]) {
      return fail(id, absl::StrCat("pins ", n.pins, " != leases' and pinned prefixes' ",
                                   expected_pins[id]));
    }
    uint32_t kids = 0;
    for (NodeId c = n.first_child; c != kNone; c = nodes_[c].next_sibling) {
      ++kids;
      if (nodes_[c].parent != id) return fail(c, "parent link broken");
    }
    if (kids != n.num_children) return fail(id, "child count mismatch");
    if (n.candidate != Eligible(n, id)) return fail(id, "candidate index out of date");
    candidates += n.candidate;
    if (n.candidate && !by_time_.count({n.last_access, id})) return fail(id, "not in time index");
    if (id == kRoot) continue;
    if (n.tokens.empty()) return fail(id, "empty edge");
    const Node& p = nodes_[n.parent];
    if (!p.live || n.start != p.end()) return fail(id, "edge does not continue its parent");
    auto key = children_.find(ChildKey(n.parent, n.tokens.front()));
    if (key == children_.end() || key->second != id) return fail(id, "child index broken");
    const size_t want = has_kv_ ? PageIndexEnd(n.end()) - PageIndexBegin(n.start) : 0;
    if (n.pages.size() != want) {
      return fail(id, absl::StrCat(n.pages.size(), " pages, expected ", want));
    }
    for (Handle h : n.pages) {
      if (!h.valid() || h.pool() != Pool::kKvPage || !handles.insert(h.raw()).second) {
        return fail(id, "bad or shared KV page handle");
      }
    }
    pages += n.pages.size();
    if (n.checkpoint.valid()) {
      if (!has_ssm_ || n.checkpoint.pool() != Pool::kSsmBlock ||
          !handles.insert(n.checkpoint.raw()).second) {
        return fail(id, "bad or shared checkpoint handle");
      }
      ++checkpoints;
    }
    if (!n.checkpoint.valid() && n.num_children == 1 && n.prefix_pins > 0 &&
        n.pins == n.prefix_pins && n.pins == nodes_[n.first_child].pins) {
      return fail(id, "a split inside a pinned prefix that nothing ends at or branches from");
    }
    if (n.pins == 0 && !n.checkpoint.valid()) {
      if (n.num_children == 1) return fail(id, "unpinned single-child node without a state");
      if (n.num_children == 0 && has_ssm_) return fail(id, "unpinned leaf without a state");
    }
  }
  if (pages != stats_.kv_pages) {
    return absl::InternalError(absl::StrCat("page count ", stats_.kv_pages, " != ", pages));
  }
  if (checkpoints != stats_.checkpoints) {
    return absl::InternalError("checkpoint count mismatch");
  }
  if (candidates != by_time_.size() ||
      (config_.eviction == EvictionPolicy::kFlopAware && candidates != by_efficiency_.size())) {
    return absl::InternalError("candidate index size mismatch");
  }
  return absl::OkStatus();
}

}  // namespace tandem::cache
