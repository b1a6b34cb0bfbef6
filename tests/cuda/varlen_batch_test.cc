// Varlen calls on CUDA (the recurrent ops' `sequences`): one launch over sequences of any
// lengths, each finding its rows through cu_seqlens, its state through the state table and its
// snapshots through the flat snapshot table, against the reference backend's varlen calls
// (which equal one call per sequence: tests/kernels/varlen_batch_test.cc).
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/workspace.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::AllClose;
using kernels::testing::Rng;
using testing::NewOps;
using testing::ScatteredDeviceStates;
using testing::ToDevice;
using testing::ToHost;

// Prefills with snapshots (after 0 tokens, mid-way, at the end), decode rows, a one-token
// sequence with a snapshot, and a prefill longer than a warp's stride and than the kernels'
// tiles of 8 tokens, with snapshots at a tile's end, after it, twice at one position, and at the
// end.
const std::vector<int64_t> kLengths = {3, 1, 1, 6, 1, 40};
const std::vector<std::vector<int64_t>> kSnapshotsAfter = {{0, 2}, {}, {},
                                                           {3, 6}, {1}, {8, 9, 17, 17, 40}};

// The states, snapshot blocks and tables of one varlen call, on host and device.
struct VarlenTables {
  explicit VarlenTables(int64_t state_floats)
      : states(static_cast<int64_t>(kLengths.size()), state_floats, 1),
        snapshot_blocks(SnapshotCount(), state_floats, 2) {
    std::vector<int64_t> cu_seqlens = {0};
    std::vector<int32_t> cu_snapshots = {0};
    std::vector<BlockSnapshot> host_flat, device_flat;
    for (size_t s = 0; s < kLengths.size(); ++s) {
      cu_seqlens.push_back(cu_seqlens.back() + kLengths[s]);
      for (int64_t after : kSnapshotsAfter[s]) {
        host_flat.push_back({after, snapshot_blocks.host_table[host_flat.size()]});
        device_flat.push_back({after, snapshot_blocks.device_pointers[device_flat.size()]});
      }
      cu_snapshots.push_back(static_cast<int32_t>(host_flat.size()));
    }
    rows = cu_seqlens.back();
    host_cu_seqlens = cu_seqlens;
    host_cu_snapshots = cu_snapshots;
    host_snapshots = host_flat;
    device_cu_seqlens = ToDevice(cu_seqlens);
    device_cu_snapshots = ToDevice(cu_snapshots);
    device_snapshots = ToDevice(device_flat);
  }
  static int64_t SnapshotCount() {
    int64_t n = 0;
    for (const auto& s : kSnapshotsAfter) n += static_cast<int64_t>(s.size());
    return n;
  }
  // The call's batch fields for the reference (host) or CUDA (device) backend.
  template <typename Args>
  void Bind(Args* a, bool device) {
    a->tokens = rows;
    a->state_offset = ScatteredDeviceStates::kOffset;
    a->state_table = device ? states.device_table.get() : states.host_table.data();
    a->sequences.count = static_cast<int64_t>(kLengths.size());
    a->sequences.cu_seqlens = device ? device_cu_seqlens.get() : host_cu_seqlens.data();
    a->sequences.cu_snapshots = device ? device_cu_snapshots.get() : host_cu_snapshots.data();
    a->sequences.snapshots = device ? device_snapshots.get() : host_snapshots.data();
  }
  void ExpectStatesMatch() {
    EXPECT_TRUE(AllClose(ToHost(states.device), states.host, 1e-5f, 1e-5f));
    EXPECT_TRUE(AllClose(ToHost(snapshot_blocks.device), snapshot_blocks.host, 1e-5f, 1e-5f));
  }

  int64_t rows = 0;
  ScatteredDeviceStates states, snapshot_blocks;
  std::vector<int64_t> host_cu_seqlens;
  std::vector<int32_t> host_cu_snapshots;
  std::vector<BlockSnapshot> host_snapshots;
  DeviceBuffer<int64_t> device_cu_seqlens;
  DeviceBuffer<int32_t> device_cu_snapshots;
  DeviceBuffer<BlockSnapshot> device_snapshots;
};

TEST(CudaVarlenBatchTest, CausalConvMatchesTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  ReferenceOps ref;
  const int32_t channels = 70, kernel = 4;
  VarlenTables tables(int64_t{kernel - 1} * channels);
  const int64_t rows = tables.rows, ld = channels + 1;
  Rng rng(7);
  const auto u = rng.Uniform(rows * ld), w = rng.Uniform(int64_t{channels} * kernel),
             bias = rng.Uniform(channels);
  auto du = ToDevice(u), dw = ToDevice(w), db = ToDevice(bias);
  auto dout = ToDevice(std::vector<float>(rows * ld, 0.0f));
  std::vector<float> out(rows * ld, 0.0f);
  CausalConvArgs a;
  a.channels = channels;
  a.kernel = kernel;
  a.ld_u = a.ld_out = ld;
  a.u = u.data();
  a.weight = w.data();
  a.bias = bias.data();
  a.out = out.data();
  tables.Bind(&a, false);
  ref.CausalConv1d(a);
  a.u = du.get();
  a.weight = dw.get();
  a.bias = db.get();
  a.out = dout.get();
  tables.Bind(&a, true);
  ops->CausalConv1d(a);
  ASSERT_EQ(ops->Synchronize(), "");
  EXPECT_TRUE(AllClose(ToHost(dout), out, 1e-5f, 1e-5f));
  tables.ExpectStatesMatch();
}

TEST(CudaVarlenBatchTest, SelectiveScanMatchesTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  ReferenceOps ref;
  const int32_t inner = 42, n = 16;  // 4 channels per warp leave a partial last warp
  VarlenTables tables(int64_t{inner} * n);
  const int64_t rows = tables.rows, ld = inner, ld_bc = n;
  Rng rng(8);
  const auto u = rng.Uniform(rows * ld), delta = rng.Uniform(rows * ld, -4, 2),
             delta_bias = rng.Uniform(inner, -1, 1), a_log = rng.Uniform(inner * n, -3, -0.05f),
             b = rng.Uniform(rows * ld_bc), c = rng.Uniform(rows * ld_bc), d = rng.Uniform(inner),
             z = rng.Uniform(rows * ld);
  auto du = ToDevice(u), ddelta = ToDevice(delta), ddb = ToDevice(delta_bias), da = ToDevice(a_log),
       dbb = ToDevice(b), dc = ToDevice(c), dd = ToDevice(d), dz = ToDevice(z),
       dy = ToDevice(std::vector<float>(rows * ld, 0.0f));
  std::vector<float> y(rows * ld, 0.0f);
  SelectiveScanArgs s;
  s.inner = inner;
  s.state_size = n;
  s.ld_u = s.ld_delta = s.ld_z = s.ld_y = ld;
  s.ld_b = s.ld_c = ld_bc;
  s.u = u.data();
  s.delta = delta.data();
  s.delta_bias = delta_bias.data();
  s.a = a_log.data();
  s.b = b.data();
  s.c = c.data();
  s.d = d.data();
  s.z = z.data();
  s.y = y.data();
  tables.Bind(&s, false);
  ref.SelectiveScan(s);
  s.u = du.get();
  s.delta = ddelta.get();
  s.delta_bias = ddb.get();
  s.a = da.get();
  s.b = dbb.get();
  s.c = dc.get();
  s.d = dd.get();
  s.z = dz.get();
  s.y = dy.get();
  tables.Bind(&s, true);
  ops->SelectiveScan(s);
  ASSERT_EQ(ops->Synchronize(), "");
  EXPECT_TRUE(AllClose(ToHost(dy), y, 1e-4f, 1e-4f));
  tables.ExpectStatesMatch();
}

TEST(CudaVarlenBatchTest, SsdScanMatchesTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  ReferenceOps ref;
  const int32_t heads = 4, p = 8, n = 32, groups = 2;
  VarlenTables tables(int64_t{heads} * p * n);
  const int64_t rows = tables.rows, ld_x = int64_t{heads} * p, ld_dt = heads,
                ld_bc = int64_t{groups} * n;
  Rng rng(9);
  const auto x = rng.Uniform(rows * ld_x), dt = rng.Uniform(rows * ld_dt, -5, 1),
             dt_bias = rng.Uniform(heads, -1, 1), a_log = rng.Uniform(heads, -4, -0.1f),
             b = rng.Uniform(rows * ld_bc), c = rng.Uniform(rows * ld_bc), d = rng.Uniform(heads);
  auto dx = ToDevice(x), ddt = ToDevice(dt), ddtb = ToDevice(dt_bias), da = ToDevice(a_log),
       dbb = ToDevice(b), dc = ToDevice(c), dd = ToDevice(d),
       dy = ToDevice(std::vector<float>(rows * ld_x, 0.0f));
  std::vector<float> y(rows * ld_x, 0.0f);
  SsdScanArgs s;
  s.heads = heads;
  s.head_dim = p;
  s.groups = groups;
  s.state_size = n;
  s.ld_x = s.ld_y = ld_x;
  s.ld_dt = ld_dt;
  s.ld_b = s.ld_c = ld_bc;
  s.x = x.data();
  s.dt = dt.data();
  s.dt_bias = dt_bias.data();
  s.a = a_log.data();
  s.b = b.data();
  s.c = c.data();
  s.d = d.data();
  s.y = y.data();
  tables.Bind(&s, false);
  Workspace ws;
  ref.SsdScan(s, ws);
  s.x = dx.get();
  s.dt = ddt.get();
  s.dt_bias = ddtb.get();
  s.a = da.get();
  s.b = dbb.get();
  s.c = dc.get();
  s.d = dd.get();
  s.y = dy.get();
  tables.Bind(&s, true);
  ops->SsdScan(s, ws);
  ASSERT_EQ(ops->Synchronize(), "");
  EXPECT_TRUE(AllClose(ToHost(dy), y, 1e-4f, 1e-4f));
  tables.ExpectStatesMatch();
}

// Attention of a pass's rows, each with its own pages and position, with the sequences named
// (cu_seqlens, max_seqlen) so that prefill rows attend tile by tile and decode rows alone.
TEST(CudaVarlenBatchTest, AttentionOfPrefillAndDecodeRowsMatchesTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  const int32_t heads = 8, kv_heads = 2, page_tokens = 16;
  // (first position, rows) per sequence.
  const std::vector<std::pair<int64_t, int64_t>> sequences = {{10, 40}, {30, 1}, {0, 20}, {5, 1}};
  for (int32_t head_dim : {64, 128, 160}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    const int64_t page_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
    std::vector<int64_t> pages;
    for (const auto& [first, rows] : sequences) {
      pages.push_back((first + rows + page_tokens - 1) / page_tokens);
    }
    testing::PagedSequences kv(pages, page_floats, 31);
    std::vector<float*const*> host_rows, device_rows;
    std::vector<int64_t> positions, cu_seqlens = {0};
    for (size_t s = 0; s < sequences.size(); ++s) {
      for (int64_t t = 0; t < sequences[s].second; ++t) {
        host_rows.push_back(kv.host_tables[s]);
        device_rows.push_back(kv.device_page_tables[s].get());
        positions.push_back(sequences[s].first + t);
      }
      cu_seqlens.push_back(cu_seqlens.back() + sequences[s].second);
    }
    const int64_t rows = cu_seqlens.back(), width = int64_t{heads} * head_dim;
    const std::vector<float> q = Rng(head_dim).Uniform(rows * width);
    AttentionArgs a;
    a.tokens = rows;
    a.heads = heads;
    a.ld_q = a.ld_out = width;
    a.kv.page_tokens = page_tokens;
    a.kv.num_kv_heads = kv_heads;
    a.kv.head_dim = head_dim;
    a.scale = 0.125f;
    std::vector<float> want(rows * width, 0.0f);
    a.q = q.data();
    a.out = want.data();
    a.page_tables = host_rows.data();
    a.positions = positions.data();
    Workspace ws;
    ReferenceOps().Attention(a, ws);

    auto dq = ToDevice(q), dout = ToDevice(std::vector<float>(rows * width, 9.0f));
    auto drows = ToDevice(device_rows);
    auto dpositions = ToDevice(positions), dcu = ToDevice(cu_seqlens);
    a.q = dq.get();
    a.out = dout.get();
    a.page_tables = drows.get();
    a.positions = dpositions.get();
    a.sequences = static_cast<int64_t>(sequences.size());
    a.cu_seqlens = dcu.get();
    a.max_seqlen = 40;
    // The device backend's scratch (the split-key parts) must be device memory.
    Workspace device_ws(1 << 16, &ops->activation_memory());
    ops->Attention(a, device_ws);
    ASSERT_EQ(ops->Synchronize(), "");
    EXPECT_TRUE(AllClose(ToHost(dout), want, 1e-5f, 1e-4f));
  }
}

}  // namespace
}  // namespace tandem::kernels::cuda
