// Decode batches over a pool of KV pages for the attention tests: sequences whose page tables
// share prefix pages by pointer, as the engine shares a cached prefix, and plain decode attention
// of each as the oracle.
#ifndef TANDEM_TESTS_KERNELS_PAGED_DECODE_BATCH_H_
#define TANDEM_TESTS_KERNELS_PAGED_DECODE_BATCH_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "kernels/workspace.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::testing {

// Pages of a model with two attention layers (the tests use layer 1, so a wrong layer offset
// shows up), filled with random K/V. Sequences are page tables over a shared pool, so prefix
// pages can be shared by pointer exactly as the engine shares cached prefixes.
class PagePool {
 public:
  PagePool(int32_t page_tokens, int32_t kv_heads, int32_t head_dim, uint32_t seed,
           float kv_range = 1.0f)
      : rng_(seed), kv_range_(kv_range) {
    kv_.page_tokens = page_tokens;
    kv_.num_kv_heads = kv_heads;
    kv_.head_dim = head_dim;
    kv_.layer_offset = 2 * int64_t{kv_heads} * page_tokens * head_dim;
  }
  float* NewPage() {
    pages_.push_back(std::make_unique<std::vector<float>>(
        rng_.Uniform(2 * kv_.layer_offset, -kv_range_, kv_range_)));
    return pages_.back()->data();
  }
  std::vector<float*> NewPages(int64_t n) {
    std::vector<float*> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(NewPage());
    return v;
  }
  PagedKv View(const std::vector<float*>& table) const {
    PagedKv kv = kv_;
    kv.pages = table.data();
    return kv;
  }
  int32_t page_tokens() const { return kv_.page_tokens; }

 private:
  Rng rng_;
  float kv_range_;
  PagedKv kv_;
  std::vector<std::unique_ptr<std::vector<float>>> pages_;
};

struct Shape {
  int32_t heads, kv_heads, head_dim;
};

// One decode row per sequence; sequence i's query is at position pos[i] of table[i].
struct DecodeBatch {
  std::vector<std::vector<float*>> tables;
  std::vector<int64_t> pos;
  std::vector<float> q;  // [B, heads·head_dim]
};

// Plain decode attention of every sequence: the oracle.
inline std::vector<float> PlainAttention(Ops& ops, const PagePool& pool, const DecodeBatch& b,
                                         const Shape& s, float scale) {
  const int64_t width = int64_t{s.heads} * s.head_dim;
  std::vector<float> out(b.pos.size() * width, 7.0f);
  Workspace ws;
  for (size_t i = 0; i < b.pos.size(); ++i) {
    AttentionArgs a;
    a.tokens = 1;
    a.start_pos = b.pos[i];
    a.heads = s.heads;
    a.q = b.q.data() + i * width;
    a.ld_q = width;
    a.kv = pool.View(b.tables[i]);
    a.scale = scale;
    a.out = out.data() + i * width;
    a.ld_out = width;
    ws.Reset();
    ops.Attention(a, ws);
  }
  return out;
}

// B sequences sharing `prefix_pages` pages, each with a private suffix of suffix_len[i] tokens
// (the last being the decode token's own K/V).
inline DecodeBatch SharedPrefixBatch(PagePool& pool, const Shape& s, int64_t prefix_pages,
                                     const std::vector<int64_t>& suffix_len, Rng& rng,
                                     float q_range = 1.0f) {
  DecodeBatch b;
  const std::vector<float*> prefix = pool.NewPages(prefix_pages);
  const int64_t pt = pool.page_tokens();
  for (int64_t len : suffix_len) {
    const int64_t pos = prefix_pages * pt + len - 1;
    std::vector<float*> table = prefix;
    while (static_cast<int64_t>(table.size()) * pt <= pos) table.push_back(pool.NewPage());
    b.tables.push_back(table);
    b.pos.push_back(pos);
  }
  b.q = rng.Uniform(suffix_len.size() * s.heads * s.head_dim, -q_range, q_range);
  return b;
}

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_KERNELS_PAGED_DECODE_BATCH_H_
