// Decode batches on CUDA (the recurrent ops' state_table, attention's page_tables): one launch
// over many sequences, each finding its state or pages through a device table, against the
// reference backend's batches (which equal one call per sequence:
// tests/kernels/decode_batch_test.cc).
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
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
using testing::ToDevice;
using testing::ToHost;

constexpr int64_t kOffset = testing::ScatteredDeviceStates::kOffset;
using States = testing::ScatteredDeviceStates;

using testing::PagedSequences;

TEST(CudaDecodeBatchTest, ConvAndBothScansMatchTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  ReferenceOps ref;
  const int64_t rows = 5;
  Rng rng(7);

  {  // conv
    const int32_t channels = 70, kernel = 4;
    const int64_t ld = channels + 1;
    const auto u = rng.Uniform(rows * ld), w = rng.Uniform(int64_t{channels} * kernel),
               bias = rng.Uniform(channels);
    auto du = ToDevice(u), dw = ToDevice(w), db = ToDevice(bias);
    auto dout = ToDevice(std::vector<float>(rows * ld, 0.0f));
    States states(rows, int64_t{kernel - 1} * channels, 1);
    std::vector<float> out(rows * ld, 0.0f);
    CausalConvArgs a;
    a.tokens = rows;
    a.channels = channels;
    a.kernel = kernel;
    a.ld_u = a.ld_out = ld;
    a.state_offset = kOffset;
    a.u = u.data();
    a.weight = w.data();
    a.bias = bias.data();
    a.out = out.data();
    a.state_table = states.host_table.data();
    ref.CausalConv1dStep(a);
    a.u = du.get();
    a.weight = dw.get();
    a.bias = db.get();
    a.out = dout.get();
    a.state_table = states.device_table.get();
    ops->CausalConv1dStep(a);
    ASSERT_EQ(ops->Synchronize(), "");
    EXPECT_TRUE(AllClose(ToHost(dout), out, 1e-5f, 1e-5f));
    EXPECT_TRUE(AllClose(ToHost(states.device), states.host, 1e-6f, 1e-6f));
  }
  {  // Mamba-1 selective scan
    const int32_t inner = 40, n = 16;
    const int64_t ld = inner, ld_bc = n;
    const auto u = rng.Uniform(rows * ld), delta = rng.Uniform(rows * ld, -4, 2),
               delta_bias = rng.Uniform(inner, -1, 1), a_log = rng.Uniform(inner * n, -3, -0.05f),
               b = rng.Uniform(rows * ld_bc), c = rng.Uniform(rows * ld_bc), d = rng.Uniform(inner),
               z = rng.Uniform(rows * ld);
    auto du = ToDevice(u), ddelta = ToDevice(delta), ddb = ToDevice(delta_bias),
         da = ToDevice(a_log), dbb = ToDevice(b), dc = ToDevice(c), dd = ToDevice(d),
         dz = ToDevice(z), dy = ToDevice(std::vector<float>(rows * ld, 0.0f));
    States states(rows, int64_t{inner} * n, 2);
    std::vector<float> y(rows * ld, 0.0f);
    SelectiveScanArgs s;
    s.tokens = rows;
    s.inner = inner;
    s.state_size = n;
    s.ld_u = s.ld_delta = s.ld_z = s.ld_y = ld;
    s.ld_b = s.ld_c = ld_bc;
    s.state_offset = kOffset;
    s.u = u.data(), s.delta = delta.data(), s.delta_bias = delta_bias.data(), s.a = a_log.data();
    s.b = b.data(), s.c = c.data(), s.d = d.data(), s.z = z.data(), s.y = y.data();
    s.state_table = states.host_table.data();
    ref.SelectiveStateUpdate(s);
    s.u = du.get(), s.delta = ddelta.get(), s.delta_bias = ddb.get(), s.a = da.get();
    s.b = dbb.get(), s.c = dc.get(), s.d = dd.get(), s.z = dz.get(), s.y = dy.get();
    s.state_table = states.device_table.get();
    ops->SelectiveStateUpdate(s);
    ASSERT_EQ(ops->Synchronize(), "");
    EXPECT_TRUE(AllClose(ToHost(dy), y, 1e-5f, 1e-4f));
    EXPECT_TRUE(AllClose(ToHost(states.device), states.host, 1e-5f, 1e-5f));
  }
  {  // Mamba-2 SSD
    const int32_t heads = 4, p = 8, groups = 2, n = 32;
    const int64_t ld_x = heads * p, ld_dt = heads, ld_bc = groups * n;
    const auto x = rng.Uniform(rows * ld_x), dt = rng.Uniform(rows * ld_dt, -5, 1),
               dt_bias = rng.Uniform(heads, -1, 1), a_log = rng.Uniform(heads, -4, -0.1f),
               b = rng.Uniform(rows * ld_bc), c = rng.Uniform(rows * ld_bc), d = rng.Uniform(heads);
    auto dx = ToDevice(x), ddt = ToDevice(dt), ddtb = ToDevice(dt_bias), da = ToDevice(a_log),
         dbb = ToDevice(b), dc = ToDevice(c), dd = ToDevice(d),
         dy = ToDevice(std::vector<float>(rows * ld_x, 0.0f));
    States states(rows, int64_t{heads} * p * n, 3);
    std::vector<float> y(rows * ld_x, 0.0f);
    SsdScanArgs s;
    s.tokens = rows;
    s.heads = heads, s.head_dim = p, s.groups = groups, s.state_size = n;
    s.ld_x = s.ld_y = ld_x;
    s.ld_dt = ld_dt;
    s.ld_b = s.ld_c = ld_bc;
    s.state_offset = kOffset;
    s.x = x.data(), s.dt = dt.data(), s.dt_bias = dt_bias.data(), s.a = a_log.data();
    s.b = b.data(), s.c = c.data(), s.d = d.data(), s.y = y.data();
    s.state_table = states.host_table.data();
    ref.SsdStateUpdate(s);
    s.x = dx.get(), s.dt = ddt.get(), s.dt_bias = ddtb.get(), s.a = da.get();
    s.b = dbb.get(), s.c = dc.get(), s.d = dd.get(), s.y = dy.get();
    s.state_table = states.device_table.get();
    ops->SsdStateUpdate(s);
    ASSERT_EQ(ops->Synchronize(), "");
    EXPECT_TRUE(AllClose(ToHost(dy), y, 1e-5f, 1e-4f));
    EXPECT_TRUE(AllClose(ToHost(states.device), states.host, 1e-5f, 1e-5f));
  }
}

// At this small batch the keys are split across the GPU and the parts merged (DecodeAttention
// with KeySplits): short contexts leave most splits empty, long ones fill many. GQA groups of 1
// to 16 query heads and head dims that are multiples of 4 up to 128 take a block per (row, KV
// head); 160 (and 90: no 16-byte loads) a warp per (row, query head).
TEST(CudaDecodeBatchTest, AttentionMatchesTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  struct Shape {
    int32_t heads, kv_heads, head_dim;
  };
  for (const Shape shape : {Shape{4, 2, 32}, Shape{16, 2, 128}, Shape{8, 8, 64}, Shape{6, 1, 96},
                            Shape{32, 2, 64}, Shape{4, 2, 160}, Shape{4, 2, 90}}) {
    const int32_t heads = shape.heads, kv_heads = shape.kv_heads, head_dim = shape.head_dim;
    const int32_t page_tokens = 4;
    for (const std::vector<int64_t>& positions :
         {std::vector<int64_t>{6, 0, 13}, std::vector<int64_t>{3000, 0, 700}}) {
      SCOPED_TRACE("longest context " + std::to_string(positions[0] + 1) + ", " +
                   std::to_string(heads) + " heads over " + std::to_string(kv_heads) + " × " +
                   std::to_string(head_dim));
      const int64_t rows = static_cast<int64_t>(positions.size());
      const int64_t page_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
      std::vector<int64_t> pages_per_sequence;
      for (int64_t pos : positions) pages_per_sequence.push_back(pos / page_tokens + 1);
      PagedSequences kv(pages_per_sequence, page_floats, 5);
      Rng rng(6);
      auto device_positions = ToDevice(positions);
      const int64_t ld = int64_t{heads} * head_dim;
      const std::vector<float> q = rng.Uniform(rows * ld);
      auto dq = ToDevice(q);
      auto dout = ToDevice(std::vector<float>(rows * ld, 0.0f));
      std::vector<float> out(rows * ld, 0.0f);
      AttentionArgs a;
      a.tokens = rows;
      a.heads = heads;
      a.ld_q = a.ld_out = ld;
      a.kv.page_tokens = page_tokens;
      a.kv.num_kv_heads = kv_heads;
      a.kv.head_dim = head_dim;
      a.scale = 0.2f;
      a.q = q.data();
      a.out = out.data();
      a.page_tables = kv.host_tables.data();
      a.positions = positions.data();
      Workspace host_ws;
      ReferenceOps().Attention(a, host_ws);
      a.q = dq.get();
      a.out = dout.get();
      a.page_tables = kv.device_table_of_tables.get();
      a.positions = device_positions.get();
      Workspace ws(1 << 16, &ops->activation_memory());
      ops->Attention(a, ws);
      ASSERT_EQ(ops->Synchronize(), "");
      EXPECT_TRUE(AllClose(ToHost(dout), out, 1e-5f, 1e-4f));
    }
  }
}

TEST(CudaDecodeBatchTest, SuffixAttentionAndIndexedRowsMatchTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  const int32_t heads = 4, kv_heads = 1, head_dim = 64, page_tokens = 8;
  const std::vector<int64_t> begins = {0, 16, 9}, ends = {5, 30, 9};
  const int64_t rows = static_cast<int64_t>(begins.size()), pages_each = 4;
  const int64_t page_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
  PagedSequences kv(std::vector<int64_t>(rows, pages_each), page_floats, 21);
  Rng rng(22);
  auto dbegins = ToDevice(begins), dends = ToDevice(ends);
  const int64_t ld = int64_t{heads} * head_dim;
  const std::vector<float> q = rng.Uniform(rows * ld);
  auto dq = ToDevice(q);
  auto dout = ToDevice(std::vector<float>(rows * ld, 0.0f));
  auto dlse = ToDevice(std::vector<float>(rows * heads, 0.0f));
  std::vector<float> out(rows * ld), lse(rows * heads);
  PartialAttentionArgs a;
  a.rows = rows;
  a.heads = heads;
  a.ld_q = a.ld_out = ld;
  a.ld_lse = heads;
  a.kv.page_tokens = page_tokens;
  a.kv.num_kv_heads = kv_heads;
  a.kv.head_dim = head_dim;
  a.scale = 0.125f;
  a.q = q.data();
  a.out = out.data();
  a.lse = lse.data();
  a.page_tables = kv.host_tables.data();
  a.key_begins = begins.data();
  a.key_ends = ends.data();
  Workspace host_ws;
  ReferenceOps().PartialAttention(a, host_ws);
  a.q = dq.get();
  a.out = dout.get();
  a.lse = dlse.get();
  a.page_tables = kv.device_table_of_tables.get();
  a.key_begins = dbegins.get();
  a.key_ends = dends.get();
  Workspace ws(1 << 16, &ops->activation_memory());
  ops->PartialAttention(a, ws);
  ASSERT_EQ(ops->Synchronize(), "");
  EXPECT_TRUE(AllClose(ToHost(dout), out, 1e-5f, 1e-4f));
  const std::vector<float> got_lse = ToHost(dlse);
  for (int64_t i = 0; i < rows * heads; ++i) {
    if (std::isinf(lse[i])) {
      EXPECT_TRUE(std::isinf(got_lse[i]) && got_lse[i] < 0) << i;  // the empty range
    } else {
      EXPECT_NEAR(got_lse[i], lse[i], 1e-4f) << i;
    }
  }

  // Rows by index: the gather takes rows 2 and 0; the scatter puts them back.
  const std::vector<int32_t> picked = {2, 0};
  auto gathered = ToDevice(std::vector<float>(2 * ld, 0.0f));
  ops->GatherRowsAt(dq.get(), ld, picked, ld, gathered.get(), ld);
  auto scattered = ToDevice(std::vector<float>(rows * ld, -1.0f));
  ops->ScatterRowsTo(gathered.get(), ld, picked, ld, scattered.get(), ld);
  ASSERT_EQ(ops->Synchronize(), "");
  const std::vector<float> g = ToHost(gathered), back = ToHost(scattered);
  for (int64_t c = 0; c < ld; ++c) {
    EXPECT_EQ(g[c], q[2 * ld + c]);
    EXPECT_EQ(g[ld + c], q[c]);
    EXPECT_EQ(back[c], q[c]);
    EXPECT_EQ(back[ld + c], -1.0f);
    EXPECT_EQ(back[2 * ld + c], q[2 * ld + c]);
  }
}

TEST(CudaDecodeBatchTest, RopeAndKvWritesMatchTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  const int32_t heads = 2, head_dim = 16, page_tokens = 4;
  const std::vector<int64_t> positions = {9, 2, 0, 14};
  const int64_t rows = static_cast<int64_t>(positions.size()), width = int64_t{heads} * head_dim;
  const int64_t page_floats = 2 * width * page_tokens, pages_each = 4;
  Rng rng(31);
  std::vector<float> x = rng.Uniform(rows * width);
  const std::vector<float> k = rng.Uniform(rows * width), v = rng.Uniform(rows * width);
  auto dx = ToDevice(x), dk = ToDevice(k), dv = ToDevice(v);
  auto dpositions = ToDevice(positions);
  PagedSequences pages(std::vector<int64_t>(rows, pages_each), page_floats, 32);
  ReferenceOps ref;
  ref.RopeAt(x.data(), width, rows, heads, head_dim, positions.data(), 10000.0f);
  ops->RopeAt(dx.get(), width, rows, heads, head_dim, dpositions.get(), 10000.0f);
  PagedKv kv;
  kv.page_tokens = page_tokens;
  kv.num_kv_heads = heads;
  kv.head_dim = head_dim;
  ref.WriteKvAt(k.data(), width, v.data(), width, rows, pages.host_tables.data(), positions.data(),
                kv);
  ops->WriteKvAt(dk.get(), width, dv.get(), width, rows, pages.device_table_of_tables.get(),
                 dpositions.get(), kv);
  ASSERT_EQ(ops->Synchronize(), "");
  EXPECT_TRUE(AllClose(ToHost(dx), x, 1e-5f, 1e-5f));
  EXPECT_TRUE(AllClose(ToHost(pages.device), pages.host, 0, 0));
}

}  // namespace
}  // namespace tandem::kernels::cuda
