// CpuOps: causal attention over the paged KV cache, one pass with an online (streaming) softmax
// in fp32 (attention_stream.h). A task is one query token × one KV head, and serves every query
// head of that GQA group, so each page block of K and V is loaded once per group.
#include <algorithm>

#include "kernels/cpu/attention_stream.h"
#include "kernels/cpu/cpu_ops.h"

namespace tandem::kernels {

void CpuOps::Attention(const AttentionArgs& a, Workspace& ws) {
  const PagedKv& kv = a.kv;
  const int64_t dh = kv.head_dim;
  const int32_t kvh = kv.num_kv_heads, group = a.heads / kvh;
  const int64_t items = a.tokens * kvh;
  const int64_t slots = std::min<int64_t>(items, pool_.size());
  const int64_t per_slot = StreamGroupScratch(group, dh);
  float* scratch = ws.Floats(slots * per_slot);
  pool_.ForEach(items, [&](int64_t slot, int64_t item) {
    const int64_t t = item / kvh;
    const int32_t j = static_cast<int32_t>(item % kvh);
    const float* q = a.q + t * a.ld_q + int64_t{j} * group * dh;
    // A decode batch: row t is its own sequence, with its own pages and position.
    PagedKv row_kv = kv;
    int64_t end = a.start_pos + t + 1;
    if (a.page_tables != nullptr) {
      row_kv.pages = a.page_tables[t];
      end = a.positions[t] + 1;
    }
    const GroupState state =
        StreamGroup(q, group, row_kv, j, 0, end, a.scale, scratch + slot * per_slot);
    NormaliseGroup(state, group, dh, a.out + t * a.ld_out + int64_t{j} * group * dh);
  });
}

}  // namespace tandem::kernels
