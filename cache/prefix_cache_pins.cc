// PrefixCache's pinned prefixes (prefix_cache.h): a pin is a lease that never ends, held on the
// node where the prefix ends.
#include <cstddef>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache/prefix_cache.h"

namespace tandem::cache {

absl::StatusOr<PrefixCache::PinId> PrefixCache::PinPrefix(absl::Span<const TokenId> tokens) {
  if (tokens.empty()) return absl::InvalidArgumentError("a pinned prefix needs tokens");
  const Walk w = WalkPrefix(tokens);
  if (w.matched < tokens.size()) {
    return absl::FailedPreconditionError(absl::StrCat("the cache holds ", w.matched, " of the ",
                                                      tokens.size(), " tokens of the prefix"));
  }
  NodeId node = w.node;
  if (w.in_edge < nodes_[node].tokens.size()) {
    // The prefix ends inside an edge. A hybrid model has no state there (states are kept at
    // node ends only), and splitting would make a node without one.
    if (has_ssm_) {
      return absl::FailedPreconditionError(
          absl::StrCat("the cache holds no state after the prefix's ", tokens.size(), " tokens"));
    }
    node = NodeEndingAt(tokens, tokens.size());
    if (node == kNone) {
      return absl::ResourceExhaustedError(
          "no KV page for splitting the cached edge where the prefix ends");
    }
  }
  if (has_ssm_ && !nodes_[node].checkpoint.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the cache holds no state after the prefix's ", tokens.size(), " tokens"));
  }
  Pin(node);
  for (NodeId cur = node; cur != kNone; cur = nodes_[cur].parent) ++nodes_[cur].prefix_pins;
  const PinId id = next_pin_++;
  pinned_prefixes_.emplace(id, node);
  return id;
}

absl::Status PrefixCache::UnpinPrefix(PinId id) {
  auto it = pinned_prefixes_.find(id);
  if (it == pinned_prefixes_.end()) {
    return absl::NotFoundError(absl::StrCat("no pinned prefix ", id));
  }
  const NodeId node = it->second;
  pinned_prefixes_.erase(it);
  for (NodeId cur = node; cur != kNone; cur = nodes_[cur].parent) --nodes_[cur].prefix_pins;
  Unpin(node, /*tidy=*/true);
  // Pins that pass through the node (leases, longer pinned prefixes) keep it pinned, so Unpin
  // did not look at it; without the pin that ended here it may now be only path compression.
  if (nodes_[node].live) Tidy(node);
  // What the pin held back may now be needed to get under capacity.
  if (config_.capacity_bytes > 0) EvictToBytes(config_.capacity_bytes);
  return absl::OkStatus();
}

bool PrefixCache::PinnedPrefixEndsAt(NodeId id) const {
  uint32_t through_children = 0;
  for (NodeId c = nodes_[id].first_child; c != kNone; c = nodes_[c].next_sibling) {
    through_children += nodes_[c].prefix_pins;
  }
  return nodes_[id].prefix_pins > through_children;
}

bool PrefixCache::InsidePinnedPrefix(absl::Span<const TokenId> tokens, size_t pos) const {
  if (pinned_prefixes_.empty() || pos == 0 || pos > tokens.size()) return false;
  const Walk w = WalkPrefix(tokens.first(pos));
  if (w.matched < pos || w.node == kRoot) return false;  // not in the tree: no pin on it
  const Node& n = nodes_[w.node];
  if (n.prefix_pins == 0) return false;
  // Inside the edge, the pinned path runs on past `pos`; at its end, it does unless a pinned
  // prefix ends right here.
  return w.in_edge < n.tokens.size() || !PinnedPrefixEndsAt(w.node);
}

size_t PrefixCache::pinned_bytes() const {
  if (pinned_prefixes_.empty()) return 0;
  absl::flat_hash_set<NodeId> counted;
  size_t total = 0;
  for (const auto& [pin, node] : pinned_prefixes_) {
    for (NodeId cur = node; cur != kRoot && counted.insert(cur).second; cur = nodes_[cur].parent) {
      const Node& n = nodes_[cur];
      total += n.pages.size() * kv_page_bytes_ + (n.checkpoint.valid() ? ssm_bytes_ : 0);
    }
  }
  return total;
}

}  // namespace tandem::cache
