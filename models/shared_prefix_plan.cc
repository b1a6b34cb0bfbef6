#include "models/shared_prefix_plan.h"

#include <algorithm>
#include <functional>

namespace tandem::models {
namespace {

// The trie is built the way a suffix tree is read off a sorted suffix array: sort the
// sequences by their page-pointer strings, take the longest common prefix (LCP) of neighbours,
// and a node is an interval whose minimum inner LCP exceeds its parent's. Everything lives in
// arrays of the batch's size, so the plan needs no pointer-chasing structure and no allocation.
struct Builder {
  std::span<const Segment> segments;
  int32_t page_tokens = 0;
  int64_t min_work = 0;
  int32_t* order = nullptr;
  int64_t* shareable = nullptr;  // per order entry: pages wholly before its new token
  int64_t* lcp = nullptr;        // lcp[i]: common pages of order[i] and order[i + 1]
  int32_t* leaf = nullptr;
  SharedPrefixNode* nodes = nullptr;
  int32_t num_nodes = 0;

  // Entries [l, r] (r > l) share pages [0, depth) and, through the enclosing nodes, the pages
  // before `pending` are attended already; `parent` is the deepest attended enclosing node.
  void Split(int32_t l, int32_t r, int64_t depth, int64_t pending, int32_t parent) {
    const int64_t common = *std::min_element(lcp + l, lcp + r);
    if (common > depth) {
      const int64_t members = r - l + 1;
      if (members * (common - pending) * page_tokens >= min_work) {
        nodes[num_nodes] = {l, static_cast<int32_t>(members), parent, pending, common};
        parent = num_nodes++;
        pending = common;
      }
      depth = common;
    }
    // Children: the runs between neighbours that share exactly `depth` pages.
    int32_t start = l;
    for (int32_t i = l; i <= r; ++i) {
      if (i < r && lcp[i] > depth) continue;
      if (i > start) {
        Split(start, i, depth, pending, parent);
      } else {
        leaf[start] = parent;
      }
      start = i + 1;
    }
  }
};

}  // namespace

SharedPrefixPlan PlanSharedPrefixes(std::span<const Segment> segments, int32_t page_tokens,
                                    int64_t min_shared_work, kernels::Workspace& ws) {
  int32_t candidates = 0;
  for (const Segment& s : segments) {
    if (s.tokens == 1 && s.start_pos >= page_tokens) ++candidates;
  }
  if (candidates < 2) return {};

  Builder b{segments, page_tokens, min_shared_work};
  b.order = ws.Array<int32_t>(candidates);
  b.shareable = ws.Array<int64_t>(candidates);
  b.lcp = ws.Array<int64_t>(candidates);
  b.leaf = ws.Array<int32_t>(candidates);
  b.nodes = ws.Array<SharedPrefixNode>(candidates);
  int32_t n = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].tokens == 1 && segments[i].start_pos >= page_tokens) {
      b.order[n++] = static_cast<int32_t>(i);
    }
  }
  // Pointers of unrelated pages are ordered with std::less, the total order the language
  // guarantees for pointers.
  auto pages = [&](int32_t seg) { return segments[seg].state->kv_pages.data(); };
  auto count = [&](int32_t seg) { return segments[seg].start_pos / page_tokens; };
  std::sort(b.order, b.order + n, [&](int32_t x, int32_t y) {
    return std::lexicographical_compare(pages(x), pages(x) + count(x), pages(y),
                                        pages(y) + count(y), std::less<float*>());
  });
  for (int32_t i = 0; i < n; ++i) b.shareable[i] = count(b.order[i]);
  for (int32_t i = 0; i + 1 < n; ++i) {
    const int64_t limit = std::min(b.shareable[i], b.shareable[i + 1]);
    float* const* x = pages(b.order[i]);
    float* const* y = pages(b.order[i + 1]);
    int64_t k = 0;
    while (k < limit && x[k] == y[k]) ++k;
    b.lcp[i] = k;
  }
  b.Split(0, n - 1, 0, 0, -1);
  if (b.num_nodes == 0) return {};

  // Keep only the sequences below some node; node members stay consecutive, since every entry
  // inside a node's interval is one of its members.
  int32_t kept = 0, next_node = 0;
  for (int32_t i = 0; i < n; ++i) {
    while (next_node < b.num_nodes && b.nodes[next_node].first == i) {
      b.nodes[next_node++].first = kept;
    }
    if (b.leaf[i] < 0) continue;
    b.order[kept] = b.order[i];
    b.leaf[kept] = b.leaf[i];
    ++kept;
  }
  return {{b.order, static_cast<size_t>(kept)},
          {b.leaf, static_cast<size_t>(kept)},
          {b.nodes, static_cast<size_t>(b.num_nodes)}};
}

}  // namespace tandem::models
