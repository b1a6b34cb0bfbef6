// The online softmax behind CpuOps's attention ops, with its arithmetic fixed so that a query
// attended on its own and queries attended together over keys they share (exact Hydragen,
// docs/ARCHITECTURE.md, "Hydragen") give the same bits.
//
// The rule, for one query head q (head_dim D) and a range of keys: each page's keys in the range
// are taken in tiles of up to 16, from the range's first key in the page. Per tile (keys k_i,
// values v_i, i < n):
//   s_i  = Dot(q, k_i) · scale
//   m'   = max(m, max_i s_i),  c = exp(m − m'),  p_i = exp(s_i − m')     (exp: FastExp's)
//   l    = l·c + Tree16(p_0 … p_{n−1}, then zeros)
//   acc  = acc·c, then acc = fma(p_i, v_i, acc) for i = 0 … n−1 in order
//   m    = m'
// where Dot(q, k) keeps 16 lanes, lane j the fused chain over d = j, j + 16, j + 32 … < D from
// +0, and Tree16(x) = ((x0+x8)+(x4+x12)) + ((x2+x10)+(x6+x14)) + (((x1+x9)+(x5+x13)) +
// ((x3+x11)+(x7+x15))) with its last add last: the lanes halve pairwise. The output is
// acc · (1/l). A range cut at a page boundary and resumed from (m, l, acc) therefore runs the very
// tiles of the uncut range. Without AVX-512 (builds without -march=native) "fused" is a product
// then a sum; each build is consistent with itself.
#ifndef TANDEM_KERNELS_CPU_ATTENTION_STREAM_H_
#define TANDEM_KERNELS_CPU_ATTENTION_STREAM_H_

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels {

// A GQA group's running state: acc [group, head_dim], max and sum [group].
struct GroupState {
  float* acc;
  float* max;
  float* sum;
};

// Floats of scratch StreamGroup needs for a group of `group` heads (a multiple of 16, so that
// slots cut from one array stay 64-byte aligned).
int64_t StreamGroupScratch(int32_t group, int64_t head_dim);

// The empty state: acc = 0, max = −inf, sum = 0.
void StartGroup(GroupState state, int32_t group, int64_t head_dim);

// Advances the state of each head gi of the group (query q + gi·head_dim, kv head j) over keys
// [key_begin, key_end) of `kv`. An empty range leaves it as it was.
void AdvanceGroup(const float* q, int32_t group, const PagedKv& kv, int32_t j, int64_t key_begin,
                  int64_t key_end, float scale, GroupState state);

// out[gi·head_dim …] = acc · (1/sum), for each head of the group.
void NormaliseGroup(GroupState state, int32_t group, int64_t head_dim, float* out);

// Starts a state in `scratch` (StreamGroupScratch floats) and advances it over the range.
GroupState StreamGroup(const float* q, int32_t group, const PagedKv& kv, int32_t j,
                       int64_t key_begin, int64_t key_end, float scale, float* scratch);

// Many queries over keys they share: `rows` query heads, all of kv head j, row r at
// q[r / group · ld_q + (head0 + r % group) · head_dim] with its state at the same place of
// `state` (AttentionState's layout). Each row ends, bit for bit, where AdvanceGroup would take
// it. `start` first empties the states. Rows sit in vector lanes, so a key is read once for all.
struct SharedRows {
  int64_t rows = 0;
  int32_t group = 1;
  int32_t head0 = 0;
  const float* q = nullptr;
  int64_t ld_q = 0;
  AttentionState state;
};
int64_t SharedRowsScratch(int64_t rows, int64_t head_dim);
void AdvanceSharedRows(const SharedRows& rows, const PagedKv& kv, int32_t j, int64_t key_begin,
                       int64_t key_end, float scale, bool start, float* scratch);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_ATTENTION_STREAM_H_
