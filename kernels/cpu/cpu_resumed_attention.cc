// CpuOps: exact Hydragen (docs/ARCHITECTURE.md, "Hydragen"). The decode rows that share a prefix
// advance their online-softmax states over it together, each shared key read once for all of
// them (AdvanceSharedRows), then each row resumes its own state over its own keys; the
// arithmetic is attention_stream.h's, so every row gets the bits Attention would give it alone.
#include <algorithm>

#include "kernels/cpu/attention_stream.h"
#include "kernels/cpu/cpu_ops.h"

namespace tandem::kernels {
namespace {

// Query heads per task: four vectors of 16 keep Qᵀ and accᵀ of 128-wide heads in 64 KiB, near L1,
// while each tile of K and V is read once per 64 rows.
constexpr int64_t kRowsPerTask = 64;

}  // namespace

void CpuOps::AdvanceSharedAttention(const SharedPrefixAttentionArgs& a, const AttentionState& st,
                                    bool start, Workspace& ws) {
  const int64_t dh = a.kv.head_dim;
  const int32_t kvh = a.kv.num_kv_heads, group = a.heads / kvh;
  const int64_t rows_per_head = a.rows * group;  // (member, group head) pairs of one kv head
  if (rows_per_head == 0) return;
  // A task takes whole members, so that a member's group heads stay in one task.
  const int64_t members_per_task = std::max<int64_t>(1, kRowsPerTask / group);
  const int64_t blocks = (a.rows + members_per_task - 1) / members_per_task;
  const int64_t items = kvh * blocks;
  const int64_t per_slot = SharedRowsScratch(members_per_task * group, dh);
  float* scratch = ws.Floats(std::min<int64_t>(items, pool_.size()) * per_slot);
  pool_.ForEach(items, [&](int64_t slot, int64_t item) {
    const int32_t j = static_cast<int32_t>(item / blocks);
    const int64_t m0 = (item % blocks) * members_per_task;
    const int64_t members = std::min(members_per_task, a.rows - m0);
    SharedRows rows;
    rows.rows = members * group;
    rows.group = group;
    rows.head0 = j * group;
    rows.q = a.q + m0 * a.ld_q;
    rows.ld_q = a.ld_q;
    rows.state = st;
    rows.state.acc += m0 * st.ld_acc;
    rows.state.max += m0 * st.ld;
    rows.state.sum += m0 * st.ld;
    AdvanceSharedRows(rows, a.kv, j, a.key_begin, a.key_end, a.scale, start,
                      scratch + slot * per_slot);
  });
}

void CpuOps::FinishAttention(const PartialAttentionArgs& a, const AttentionState& st,
                             Workspace& ws) {
  const int64_t dh = a.kv.head_dim;
  const int32_t kvh = a.kv.num_kv_heads, group = a.heads / kvh;
  pool_.ForEach(a.rows * kvh, [&](int64_t slot, int64_t item) {
    const int64_t t = item / kvh;
    const int32_t j = static_cast<int32_t>(item % kvh);
    const int64_t head0 = int64_t{j} * group;
    PagedKv row_kv = a.kv;
    row_kv.pages = a.page_tables[t];
    const GroupState state{st.acc + t * st.ld_acc + head0 * dh, st.max + t * st.ld + head0,
                           st.sum + t * st.ld + head0};
    AdvanceGroup(a.q + t * a.ld_q + head0 * dh, group, row_kv, j, a.key_begins[t], a.key_ends[t],
                 a.scale, state);
    NormaliseGroup(state, group, dh, a.out + t * a.ld_out + head0 * dh);
  });
}

}  // namespace tandem::kernels
