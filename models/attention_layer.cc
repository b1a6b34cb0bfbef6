#include "models/attention_layer.h"

#include <algorithm>

#include "models/segment_runs.h"
#include "models/shared_prefix_plan.h"
#include "models/status_macros.h"

namespace tandem::models {

absl::StatusOr<AttentionLayer> AttentionLayer::Load(WeightStore& w, const std::string& p,
                                                    const AttentionDims& dims, int32_t hidden,
                                                    const TensorShard& shard) {
  AttentionLayer layer;
  layer.dims_ = ShardAttention(dims, shard);
  layer.hidden_ = hidden;
  const int64_t q = int64_t{dims.heads} * dims.head_dim,
                kv = int64_t{dims.kv_heads} * dims.head_dim;
  // Key/value heads fewer than the ranks are held by every rank whose query heads read them.
  const TensorSlice kv_rows = KvHeadRows(dims, shard);
  TANDEM_ASSIGN_OR_RETURN(layer.qkv_, w.Stack({{p + "q_proj.weight", q, ShardSegments(shard, {q})},
                                               {p + "k_proj.weight", kv, kv_rows},
                                               {p + "v_proj.weight", kv, kv_rows}},
                                              dims.input_width));
  TANDEM_ASSIGN_OR_RETURN(layer.o_,
                          w.Matrix(p + "o_proj.weight", hidden, q, ShardSegments(shard, {q}, 1)));
  return layer;
}

void AttentionLayer::Forward(const ForwardContext& ctx, const float* x, const QkvAdapter* adapter,
                             int32_t attention_index, float* out) const {
  kernels::Ops& ops = ctx.ops;
  const int64_t rows = ctx.rows, in = dims_.input_width;
  const int64_t q_width = int64_t{dims_.heads} * dims_.head_dim;
  const int64_t kv_width = int64_t{dims_.kv_heads} * dims_.head_dim;
  const int64_t width = q_width + 2 * kv_width;

  float* qkv = ctx.ws.Floats(rows * width);
  ops.Linear(x, in, rows, qkv_, nullptr, qkv, width);
  if (adapter != nullptr) {
    const int64_t r = adapter->rank;
    float* t = ctx.ws.Floats(rows * 3 * r);
    ops.Linear(x, in, rows, adapter->down, nullptr, t, 3 * r);
    const int64_t offsets[3] = {0, q_width, q_width + kv_width};
    const int64_t widths[3] = {q_width, kv_width, kv_width};
    float* delta = ctx.ws.Floats(rows * q_width);
    for (int j = 0; j < 3; ++j) {
      ops.Linear(t + j * r, 3 * r, rows, adapter->up[j], nullptr, delta, widths[j]);
      ops.AddRows(delta, widths[j], rows, widths[j], qkv + offsets[j], width);
    }
  }

  // Every row is rotated and its K/V written, in one call each, before any attention runs:
  // the shared-prefix pass below works across sequences.
  float* q = qkv;
  float* k = q + q_width;
  float* v = k + kv_width;
  if (dims_.rope && (dims_.rope_dims == 0 || dims_.rope_dims == dims_.head_dim)) {
    ops.RopeAt(q, width, rows, dims_.heads, dims_.head_dim, ctx.row_positions, dims_.rope_theta);
    ops.RopeAt(k, width, rows, dims_.kv_heads, dims_.head_dim, ctx.row_positions,
               dims_.rope_theta);
  } else if (dims_.rope) {
    // Partial RoPE (Bamba): each head's first rope_dims dimensions are a RoPE head of that
    // width (same frequencies, same rotate-half pairing), the rest pass through. One call per
    // head: the few attention layers of these models make it cheap.
    for (int32_t head = 0; head < dims_.heads + dims_.kv_heads; ++head) {
      ops.RopeAt(q + int64_t{head} * dims_.head_dim, width, rows, 1, dims_.rope_dims,
                 ctx.row_positions, dims_.rope_theta);
    }
  }
  ops.WriteKvAt(k, width, v, width, rows, ctx.row_page_tables, ctx.row_positions,
                ctx.layout.KvView(attention_index, nullptr));

  float* attn = ctx.ws.Floats(rows * q_width);
  // The plan depends on page pointers only, so every attention layer of the pass finds the same
  // one; rebuilding it (a sort of the decode rows) costs little next to the attention it saves,
  // and keeps Model::Forward unaware of Hydragen.
  const SharedPrefixPlan plan = ctx.hydragen.enabled
                                    ? PlanSharedPrefixes(ctx.segments, ctx.layout.page_tokens(),
                                                         ctx.hydragen.min_shared_work, ctx.host)
                                    : SharedPrefixPlan{};
  // Segments the plan covers are marked so that the plain loop skips them.
  bool* shared = nullptr;
  if (!plan.order.empty()) {
    shared = ctx.host.Array<bool>(ctx.segments.size());
    std::fill(shared, shared + ctx.segments.size(), false);
    for (int32_t s : plan.order) shared[s] = true;
  }
  // Every other row in one call, or one per run of them between Hydragen's members.
  ForEachRowRun(ctx.segments, shared, [&](const SegmentRun& run) {
    const int64_t row = run.first_row;
    kernels::AttentionArgs args;
    args.tokens = run.rows;
    args.heads = dims_.heads;
    args.q = qkv + row * width;
    args.ld_q = width;
    args.kv = ctx.layout.KvView(attention_index, nullptr);
    args.scale = dims_.scale;
    args.out = attn + row * q_width;
    args.ld_out = q_width;
    args.page_tables = ctx.row_page_tables + row;
    args.positions = ctx.row_positions + row;
    args.sequences = static_cast<int64_t>(run.segments);
    args.cu_seqlens = ctx.sequences.cu_seqlens + run.first_segment;
    args.max_seqlen = run.max_tokens;
    ops.Attention(args, ctx.ws);
  });
  if (!plan.order.empty()) SharedPrefixForward(ctx, plan, qkv, width, attention_index, attn);
  ops.Linear(attn, q_width, rows, o_, nullptr, out, hidden_);
}

void AttentionLayer::SharedPrefixForward(const ForwardContext& ctx, const SharedPrefixPlan& plan,
                                         const float* qkv, int64_t width, int32_t attention_index,
                                         float* attn) const {
  kernels::Ops& ops = ctx.ops;
  const int64_t q_width = int64_t{dims_.heads} * dims_.head_dim;
  const int64_t heads = dims_.heads, pt = ctx.layout.page_tokens();
  const int64_t members = static_cast<int64_t>(plan.order.size());
  auto segment = [&](int64_t i) -> const Segment& { return ctx.segments[plan.order[i]]; };
  // A node's shared pages as a table of their own, uploaded like the other tables: a member's
  // page table would do, but it moves whenever a sequence before it in the pass gains a page,
  // and an argument that moves keeps a device from replaying the previous step's launches
  // (kernels/cuda/cuda_ops.h); this one stays put while the plan does.
  auto node_kv = [&](const SharedPrefixNode& node) {
    const std::vector<float*>& pages = segment(node.first).state->kv_pages;
    const std::span<float* const> shared(pages.data(), static_cast<size_t>(node.page_end));
    return ctx.layout.KvView(attention_index, ops.Table<float*>(shared, ctx.ws));
  };

  // The decode rows of the members, consecutive in plan order, so a node's rows are one block.
  int32_t* member_rows = ctx.host.Array<int32_t>(members);
  for (int64_t i = 0; i < members; ++i) member_rows[i] = static_cast<int32_t>(segment(i).row);
  const std::span<const int32_t> rows_of_members(member_rows, static_cast<size_t>(members));
  float* q = ctx.ws.Floats(members * q_width);
  ops.GatherRowsAt(qkv, width, rows_of_members, q_width, q, q_width);

  // A node's work over its shared pages, for all of its members.
  const int64_t num_nodes = static_cast<int64_t>(plan.nodes.size());
  auto node_args = [&](const SharedPrefixNode& node) {
    kernels::SharedPrefixAttentionArgs args;
    args.rows = node.count;
    args.heads = dims_.heads;
    args.q = q + int64_t{node.first} * q_width;
    args.ld_q = q_width;
    args.kv = node_kv(node);
    args.key_begin = node.page_begin * pt;
    args.key_end = node.page_end * pt;
    args.scale = dims_.scale;
    return args;
  };
  if (ctx.stats != nullptr) ctx.stats->hydragen_nodes += num_nodes;

  // Every member's own suffix in one call: from its leaf node's end to its own position.
  auto** tables = ctx.host.Array<float* const*>(members);
  int64_t* begins = ctx.host.Array<int64_t>(members);
  int64_t* ends = ctx.host.Array<int64_t>(members);
  for (int64_t i = 0; i < members; ++i) {
    tables[i] = segment(i).page_table;
    begins[i] = plan.nodes[plan.leaf[i]].page_end * pt;
    ends[i] = segment(i).start_pos + 1;
  }
  const size_t n_members = static_cast<size_t>(members);
  kernels::PartialAttentionArgs suffix;
  suffix.rows = members;
  suffix.heads = dims_.heads;
  suffix.q = q;
  suffix.ld_q = q_width;
  suffix.kv = ctx.layout.KvView(attention_index, nullptr);  // the layout; rows read their own pages
  suffix.page_tables = ops.Table<float* const*>({tables, n_members}, ctx.ws);
  suffix.key_begins = ops.Table<int64_t>({begins, n_members}, ctx.ws);
  suffix.key_ends = ops.Table<int64_t>({ends, n_members}, ctx.ws);
  suffix.scale = dims_.scale;
  float* merged = ctx.ws.Floats(members * q_width);

  if (ops.ResumesAttentionExactly()) {
    // Each member's online softmax runs through its nodes from the root down (preorder puts a
    // parent first; a root starts at page 0, a child where its parent ends), then through its
    // own keys: the tiles of its attention alone, so the bits of it.
    kernels::AttentionState state;
    state.acc = ctx.ws.Floats(members * q_width);
    state.ld_acc = q_width;
    state.max = ctx.ws.Floats(members * heads);
    state.sum = ctx.ws.Floats(members * heads);
    state.ld = heads;
    for (const SharedPrefixNode& node : plan.nodes) {
      kernels::AttentionState rows = state;
      rows.acc += int64_t{node.first} * q_width;
      rows.max += int64_t{node.first} * heads;
      rows.sum += int64_t{node.first} * heads;
      ops.AdvanceSharedAttention(node_args(node), rows, node.parent < 0, ctx.ws);
    }
    suffix.out = merged;
    suffix.ld_out = q_width;
    ops.FinishAttention(suffix, state, ctx.ws);
    ops.ScatterRowsTo(merged, q_width, rows_of_members, q_width, attn, q_width);
    return;
  }

  // Merged by log-sum-exp: each node's and each suffix's normalised output and log-sum-exp.
  float** node_out = ctx.host.Array<float*>(num_nodes);
  float** node_lse = ctx.host.Array<float*>(num_nodes);
  for (int64_t n = 0; n < num_nodes; ++n) {
    node_out[n] = ctx.ws.Floats(int64_t{plan.nodes[n].count} * q_width);
    node_lse[n] = ctx.ws.Floats(int64_t{plan.nodes[n].count} * heads);
    kernels::SharedPrefixAttentionArgs args = node_args(plan.nodes[n]);
    args.out = node_out[n];
    args.ld_out = q_width;
    args.lse = node_lse[n];
    args.ld_lse = heads;
    ops.SharedPrefixAttention(args, ctx.ws);
  }
  float* suffix_out = ctx.ws.Floats(members * q_width);
  float* suffix_lse = ctx.ws.Floats(members * heads);
  suffix.out = suffix_out;
  suffix.ld_out = q_width;
  suffix.lse = suffix_lse;
  suffix.ld_lse = heads;
  ops.PartialAttention(suffix, ctx.ws);

  // The merge with every node on the path to the root, once per run of members that share a
  // leaf (their rows are consecutive in every node on that path), in plan order; then every
  // row goes back to its sequence's place.
  kernels::AttentionPart* parts = ctx.host.Array<kernels::AttentionPart>(num_nodes + 1);
  for (int64_t i0 = 0; i0 < members;) {
    const int32_t leaf = plan.leaf[i0];
    int64_t i1 = i0 + 1;
    while (i1 < members && plan.leaf[i1] == leaf) ++i1;
    int64_t count = 0;
    parts[count++] = {suffix_out + i0 * q_width, q_width, suffix_lse + i0 * heads, heads};
    for (int32_t n = leaf; n >= 0; n = plan.nodes[n].parent) {
      const int64_t row = i0 - plan.nodes[n].first;
      parts[count++] = {node_out[n] + row * q_width, q_width, node_lse[n] + row * heads, heads};
    }
    ops.MergeAttention({parts, static_cast<size_t>(count)}, i1 - i0, dims_.heads, dims_.head_dim,
                       merged + i0 * q_width, q_width, nullptr, 0);
    i0 = i1;
  }
  ops.ScatterRowsTo(merged, q_width, rows_of_members, q_width, attn, q_width);
}

}  // namespace tandem::models
