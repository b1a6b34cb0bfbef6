// Which KV pages the decoding sequences of a forward pass share, for Hydragen attention
// (docs/ARCHITECTURE.md, "Hydragen"). The engine restores a cached prefix by sharing its full KV
// pages, so two sequences with a common cached prefix hold the same page pointers; a trie over the
// page pointers of the batch's decode rows (tokens == 1) finds the shared runs without asking the
// engine. Each trie node — a maximal run of pages with the same set of ≥ 2 member sequences — is
// attended once by all its members; with hierarchical sharing (a system prompt shared by all, then
// per-conversation prefixes shared by subsets) every level is a node of its own.
//
// Only pages wholly before a sequence's new token take part: the page holding the token it is
// about to write is private, and its suffix attention covers it.
#ifndef TANDEM_MODELS_SHARED_PREFIX_PLAN_H_
#define TANDEM_MODELS_SHARED_PREFIX_PLAN_H_

#include <cstdint>
#include <span>

#include "kernels/workspace.h"
#include "models/forward_context.h"

namespace tandem::models {

struct SharedPrefixNode {
  int32_t first = 0;  // members are order[first, first + count)
  int32_t count = 0;
  int32_t parent = -1;     // the enclosing node, or -1
  int64_t page_begin = 0;  // pages [page_begin, page_end) are shared by every member
  int64_t page_end = 0;
};

struct SharedPrefixPlan {
  // Indices into the pass's segments of the decode rows that share pages, in trie order, so that
  // every node's members are consecutive.
  std::span<const int32_t> order;
  // For each entry of `order`, the deepest node that contains it; its suffix attention starts at
  // that node's page_end.
  std::span<const int32_t> leaf;
  // Nodes in preorder (a parent before its children); empty when nothing is worth sharing.
  std::span<const SharedPrefixNode> nodes;
};

// Builds the plan for `segments` in `ws` memory (no heap allocation). Nodes whose (members ×
// tokens) is below `min_shared_work` are not attended on their own: their pages join those of
// the nodes below them, or the members' suffixes.
SharedPrefixPlan PlanSharedPrefixes(std::span<const Segment> segments, int32_t page_tokens,
                                    int64_t min_shared_work, kernels::Workspace& ws);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SHARED_PREFIX_PLAN_H_
