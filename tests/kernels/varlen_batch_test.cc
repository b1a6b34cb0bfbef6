// Varlen calls: a whole pass of sequences of any lengths in one call (the recurrent ops'
// `sequences`, with a flat snapshot table; attention, RoPE and the KV write with per-row tables)
// must give bit for bit what one call per sequence gives (the step op for a decode row, as the
// model would have called it), on every host backend: outputs, final states and every snapshot.
#include <gtest/gtest.h>

#include <iterator>
#include <vector>

#include "tests/kernels/batch_test_util.h"

namespace tandem::kernels {
namespace {

using testing::HostBackends;
using testing::Rng;
using testing::ScatteredStates;

// Prefills with snapshots (after 0 tokens, mid-way, at the end), a run of decode rows that a
// host backend hands to the step op, a one-token sequence with a snapshot, and a lone decode row.
const std::vector<int64_t> kLengths = {3, 1, 1, 1, 6, 1, 2, 1};
const std::vector<std::vector<int64_t>> kSnapshotsAfter = {{0, 2}, {}, {}, {}, {3, 6}, {1}, {}, {}};

int64_t TotalRows() {
  int64_t rows = 0;
  for (int64_t n : kLengths) rows += n;
  return rows;
}

// A one-sequence call the model makes with the step op.
template <typename Args>
bool IsPlainDecode(const Args& one) {
  return one.sequences.count == 0 && one.tokens == 1 && one.snapshots.empty();
}

// One run's states, snapshot blocks and tables. Two runs built with the same seed start from the
// same memory, so after a varlen call in one and one call per sequence in the other, their
// memories must be equal.
struct VarlenRun {
  VarlenRun(int64_t state_floats, uint32_t seed)
      : states(static_cast<int64_t>(kLengths.size()), state_floats, seed),
        snapshot_blocks(SnapshotCount(), state_floats, seed + 1),
        untouched_snapshot_blocks(snapshot_blocks.memory) {
    cu_seqlens.push_back(0);
    cu_snapshots.push_back(0);
    for (size_t s = 0; s < kLengths.size(); ++s) {
      cu_seqlens.push_back(cu_seqlens.back() + kLengths[s]);
      for (int64_t after : kSnapshotsAfter[s]) {
        flat.push_back({after, snapshot_blocks.table[flat.size()]});
      }
      cu_snapshots.push_back(static_cast<int32_t>(flat.size()));
    }
  }
  static int64_t SnapshotCount() {
    int64_t n = 0;
    for (const auto& s : kSnapshotsAfter) n += static_cast<int64_t>(s.size());
    return n;
  }
  VarlenSequences Sequences() const {
    return {static_cast<int64_t>(kLengths.size()), cu_seqlens.data(), cu_snapshots.data(),
            flat.data()};
  }
  // Sequence s's snapshots for a call of its own: the same blocks, at the state offset.
  std::vector<StateSnapshot> SnapshotsOf(int64_t s) const {
    std::vector<StateSnapshot> list;
    for (int32_t i = cu_snapshots[s]; i < cu_snapshots[s + 1]; ++i) {
      list.push_back({flat[i].after_tokens, flat[i].block + ScatteredStates::kOffset});
    }
    return list;
  }

  ScatteredStates states;
  ScatteredStates snapshot_blocks;
  std::vector<float> untouched_snapshot_blocks;
  std::vector<int64_t> cu_seqlens;
  std::vector<int32_t> cu_snapshots;
  std::vector<BlockSnapshot> flat;
};

// Runs `one_call` as one varlen call into `batched` and `per_sequence(s, snapshots)` for each
// sequence into `single`, then compares what both left behind.
template <typename Args, typename Call>
void ExpectVarlenEqualsOneCallEach(const Args& call_template, Call&& call, VarlenRun& batched,
                                   VarlenRun& single, std::vector<float>& out_batched,
                                   std::vector<float>& out_single, const Ops& ops) {
  Args all = call_template;
  all.tokens = TotalRows();
  all.state_table = batched.states.table.data();
  all.state_offset = ScatteredStates::kOffset;
  all.sequences = batched.Sequences();
  call(all, out_batched.data(), 0);
  for (size_t s = 0; s < kLengths.size(); ++s) {
    Args one = call_template;
    one.tokens = kLengths[s];
    one.state = single.states.state(static_cast<int64_t>(s));
    const std::vector<StateSnapshot> snapshots = single.SnapshotsOf(static_cast<int64_t>(s));
    one.snapshots = snapshots;
    call(one, out_single.data(), single.cu_seqlens[s]);
  }
  EXPECT_EQ(out_batched, out_single) << ops.name();
  EXPECT_EQ(batched.states.memory, single.states.memory) << ops.name();
  EXPECT_EQ(batched.snapshot_blocks.memory, single.snapshot_blocks.memory) << ops.name();
  EXPECT_NE(batched.snapshot_blocks.memory, batched.untouched_snapshot_blocks) << ops.name();
}

TEST(VarlenBatchTest, CausalConvOfManySequencesEqualsOneCallEach) {
  const int64_t rows = TotalRows();
  for (int32_t channels : {5, 130}) {
    const int32_t kernel = 4;
    Rng rng(channels);
    const int64_t ld = channels + 2;
    const std::vector<float> u = rng.Uniform(rows * ld), w = rng.Uniform(int64_t{channels} * kernel),
                             bias = rng.Uniform(channels);
    for (auto& ops : HostBackends()) {
      const int64_t floats = int64_t{kernel - 1} * channels;
      VarlenRun batched(floats, 3), single(floats, 3);
      std::vector<float> out_batched(rows * ld, 0.0f), out_single(rows * ld, 0.0f);
      CausalConvArgs a;
      a.channels = channels;
      a.kernel = kernel;
      a.ld_u = a.ld_out = ld;
      a.weight = w.data();
      a.bias = bias.data();
      ExpectVarlenEqualsOneCallEach(
          a,
          [&](CausalConvArgs args, float* out, int64_t row) {
            args.u = u.data() + row * ld;
            args.out = out + row * ld;
            if (IsPlainDecode(args)) {
              ops->CausalConv1dStep(args);
            } else {
              ops->CausalConv1d(args);
            }
          },
          batched, single, out_batched, out_single, *ops);
    }
  }
}

TEST(VarlenBatchTest, SelectiveScanOfManySequencesEqualsOneCallEach) {
  const int64_t rows = TotalRows();
  for (int32_t inner : {3, 150}) {
    const int32_t n = 16;
    Rng rng(inner);
    const int64_t ld = inner + 3, ld_bc = n + 1;
    const auto u = rng.Uniform(rows * ld), delta = rng.Uniform(rows * ld, -4, 2),
               delta_bias = rng.Uniform(inner, -1, 1),
               a_log = rng.Uniform(int64_t{inner} * n, -3, -0.05f), b = rng.Uniform(rows * ld_bc),
               c = rng.Uniform(rows * ld_bc), d = rng.Uniform(inner), z = rng.Uniform(rows * ld);
    for (auto& ops : HostBackends()) {
      const int64_t floats = int64_t{inner} * n;
      VarlenRun batched(floats, 4), single(floats, 4);
      std::vector<float> y_batched(rows * ld, 0.0f), y_single(rows * ld, 0.0f);
      SelectiveScanArgs s;
      s.inner = inner;
      s.state_size = n;
      s.ld_u = s.ld_delta = s.ld_z = s.ld_y = ld;
      s.ld_b = s.ld_c = ld_bc;
      s.delta_bias = delta_bias.data();
      s.a = a_log.data();
      s.d = d.data();
      ExpectVarlenEqualsOneCallEach(
          s,
          [&](SelectiveScanArgs args, float* y, int64_t row) {
            args.u = u.data() + row * ld;
            args.delta = delta.data() + row * ld;
            args.b = b.data() + row * ld_bc;
            args.c = c.data() + row * ld_bc;
            args.z = z.data() + row * ld;
            args.y = y + row * ld;
            if (IsPlainDecode(args)) {
              ops->SelectiveStateUpdate(args);
            } else {
              ops->SelectiveScan(args);
            }
          },
          batched, single, y_batched, y_single, *ops);
    }
  }
}

TEST(VarlenBatchTest, SsdScanOfManySequencesEqualsOneCallEach) {
  const int64_t rows = TotalRows();
  for (int32_t chunk : {2, 256}) {
    const int32_t heads = 8, p = 16, n = 32, groups = 2;
    Rng rng(chunk);
    const int64_t ld_x = int64_t{heads} * p + 1, ld_dt = heads + 2,
                  ld_bc = int64_t{groups} * n + 3;
    const auto x = rng.Uniform(rows * ld_x), dt = rng.Uniform(rows * ld_dt, -5, 1),
               dt_bias = rng.Uniform(heads, -1, 1), a_log = rng.Uniform(heads, -4, -0.1f),
               b = rng.Uniform(rows * ld_bc), c = rng.Uniform(rows * ld_bc),
               d = rng.Uniform(heads);
    for (auto& ops : HostBackends()) {
      const int64_t floats = int64_t{heads} * p * n;
      VarlenRun batched(floats, 5), single(floats, 5);
      std::vector<float> y_batched(rows * ld_x, 0.0f), y_single(rows * ld_x, 0.0f);
      SsdScanArgs s;
      s.heads = heads;
      s.head_dim = p;
      s.groups = groups;
      s.state_size = n;
      s.chunk_size = chunk;
      s.ld_x = s.ld_y = ld_x;
      s.ld_dt = ld_dt;
      s.ld_b = s.ld_c = ld_bc;
      s.dt_bias = dt_bias.data();
      s.a = a_log.data();
      s.d = d.data();
      Workspace ws;
      ExpectVarlenEqualsOneCallEach(
          s,
          [&](SsdScanArgs args, float* y, int64_t row) {
            args.x = x.data() + row * ld_x;
            args.dt = dt.data() + row * ld_dt;
            args.b = b.data() + row * ld_bc;
            args.c = c.data() + row * ld_bc;
            args.y = y + row * ld_x;
            if (IsPlainDecode(args)) {
              ops->SsdStateUpdate(args);
            } else {
              ops->SsdScan(args, ws);
            }
          },
          batched, single, y_batched, y_single, *ops);
    }
  }
}

// A pass's attention rows: two prefills and two decode rows, each row with its own sequence's
// pages and its own position. B's decode position follows A's last prefill position, so a host
// backend that grouped rows by position alone would write B's K/V into A's pages.
struct AttentionPass {
  static constexpr int32_t kHeads = 4, kKvHeads = 2, kHeadDim = 8, kPageTokens = 4;
  // Sequence: first position, rows.
  const std::vector<std::pair<int64_t, int64_t>> sequences = {{4, 4}, {8, 1}, {0, 3}, {9, 1}};
  static constexpr int64_t kPagesEach = 3;
  static constexpr int64_t kPageFloats = 2 * int64_t{kKvHeads} * kPageTokens * kHeadDim;

  int64_t rows() const {
    int64_t n = 0;
    for (const auto& [first, count] : sequences) n += count;
    return n;
  }
  PagedKv Layout() const {
    PagedKv kv;
    kv.page_tokens = kPageTokens;
    kv.num_kv_heads = kKvHeads;
    kv.head_dim = kHeadDim;
    return kv;
  }
};

TEST(VarlenBatchTest, RopeKvWriteAndAttentionOfAWholePassEqualOneCallPerSequence) {
  const AttentionPass pass;
  const int64_t rows = pass.rows(), n_seq = static_cast<int64_t>(pass.sequences.size());
  const int64_t q_width = int64_t{AttentionPass::kHeads} * AttentionPass::kHeadDim;
  const int64_t kv_width = int64_t{AttentionPass::kKvHeads} * AttentionPass::kHeadDim;
  Rng rng(21);
  const std::vector<float> q = rng.Uniform(rows * q_width), k = rng.Uniform(rows * kv_width),
                           v = rng.Uniform(rows * kv_width);
  const std::vector<float> initial_pages =
      rng.Uniform(n_seq * AttentionPass::kPagesEach * AttentionPass::kPageFloats);
  for (auto& ops : HostBackends()) {
    // Both runs' page memory starts equal; the per-row tables name each row's sequence pages.
    std::vector<float> batch_pages = initial_pages, single_pages = initial_pages;
    std::vector<std::vector<float*>> batch_tables(n_seq), single_tables(n_seq);
    for (int64_t s = 0; s < n_seq; ++s) {
      for (int64_t p = 0; p < AttentionPass::kPagesEach; ++p) {
        const int64_t at = (s * AttentionPass::kPagesEach + p) * AttentionPass::kPageFloats;
        batch_tables[s].push_back(batch_pages.data() + at);
        single_tables[s].push_back(single_pages.data() + at);
      }
    }
    std::vector<float* const*> row_tables;
    std::vector<int64_t> row_positions;
    for (int64_t s = 0; s < n_seq; ++s) {
      const auto [first, count] = pass.sequences[s];
      for (int64_t t = 0; t < count; ++t) {
        row_tables.push_back(batch_tables[s].data());
        row_positions.push_back(first + t);
      }
    }
    const PagedKv kv = pass.Layout();
    const float theta = 10000.0f, scale = 0.3f;

    std::vector<float> q_batch = q, k_batch = k, out_batch(rows * q_width, 0.0f);
    ops->RopeAt(q_batch.data(), q_width, rows, AttentionPass::kHeads, AttentionPass::kHeadDim,
                row_positions.data(), theta);
    ops->RopeAt(k_batch.data(), kv_width, rows, AttentionPass::kKvHeads, AttentionPass::kHeadDim,
                row_positions.data(), theta);
    ops->WriteKvAt(k_batch.data(), kv_width, v.data(), kv_width, rows, row_tables.data(),
                   row_positions.data(), kv);
    AttentionArgs all;
    all.tokens = rows;
    all.heads = AttentionPass::kHeads;
    all.q = q_batch.data();
    all.ld_q = q_width;
    all.kv = kv;
    all.scale = scale;
    all.out = out_batch.data();
    all.ld_out = q_width;
    all.page_tables = row_tables.data();
    all.positions = row_positions.data();
    Workspace ws;
    ops->Attention(all, ws);

    std::vector<float> q_single = q, k_single = k, out_single(rows * q_width, 0.0f);
    int64_t row = 0;
    for (int64_t s = 0; s < n_seq; ++s) {
      const auto [first, count] = pass.sequences[s];
      PagedKv own = kv;
      own.pages = single_tables[s].data();
      ops->Rope(q_single.data() + row * q_width, q_width, count, AttentionPass::kHeads,
                AttentionPass::kHeadDim, first, theta);
      ops->Rope(k_single.data() + row * kv_width, kv_width, count, AttentionPass::kKvHeads,
                AttentionPass::kHeadDim, first, theta);
      ops->WriteKv(k_single.data() + row * kv_width, kv_width, v.data() + row * kv_width,
                   kv_width, count, first, own);
      AttentionArgs one;
      one.tokens = count;
      one.start_pos = first;
      one.heads = AttentionPass::kHeads;
      one.q = q_single.data() + row * q_width;
      one.ld_q = q_width;
      one.kv = own;
      one.scale = scale;
      one.out = out_single.data() + row * q_width;
      one.ld_out = q_width;
      ops->Attention(one, ws);
      row += count;
    }
    EXPECT_EQ(q_batch, q_single) << ops->name();
    EXPECT_EQ(k_batch, k_single) << ops->name();
    EXPECT_EQ(batch_pages, single_pages) << ops->name();
    EXPECT_NE(batch_pages, initial_pages) << ops->name();
    EXPECT_EQ(out_batch, out_single) << ops->name();
  }
}

}  // namespace
}  // namespace tandem::kernels
