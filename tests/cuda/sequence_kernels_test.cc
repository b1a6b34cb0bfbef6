// The CUDA sequence kernels (kernels/cuda/sequence_kernels.h) against the reference backend:
// outputs, final states and every snapshot of the conv and both scans; the paged KV write;
// attention over key ranges (causal suffix and plain) with its log-sum-exp; the LSE merge. They
// skip without a CUDA device, and run on a lent GPU via scripts/gpu-check.sh.
#include "kernels/cuda/sequence_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/mma_attention.h"
#include "kernels/cuda/shared_memory_limit.h"
#include "kernels/reference/reference_ops.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::AllClose;
using kernels::testing::Rng;
using testing::ToDevice;
using testing::ToHost;

// Snapshot positions for a call of `tokens` tokens: the start; the end of the kernels' first
// tile of 8 tokens and the token after it; the middle, twice (a list may name a position twice);
// and the end.
std::vector<int64_t> SnapshotPositions(int64_t tokens) {
  std::vector<int64_t> at = {0, tokens};
  for (int64_t inside : {int64_t{8}, int64_t{9}, tokens / 2, tokens / 2}) {
    if (inside > 0 && inside < tokens) at.push_back(inside);
  }
  std::sort(at.begin(), at.end());
  return at;
}

// Host and device snapshot buffers of `floats` each, and both snapshot lists.
struct SnapshotSet {
  std::vector<std::vector<float>> host;
  std::vector<DeviceBuffer<float>> device;
  std::vector<StateSnapshot> host_list, device_list;

  SnapshotSet(const std::vector<int64_t>& at, int64_t floats) {
    for (size_t i = 0; i < at.size(); ++i) {
      host.emplace_back(floats, -7.0f);
      device.push_back(ToDevice(std::vector<float>(floats, -7.0f)));
    }
    for (size_t i = 0; i < at.size(); ++i) {
      host_list.push_back({at[i], host[i].data()});
      device_list.push_back({at[i], device[i].get()});
    }
  }
  ::testing::AssertionResult Match(float atol, float rtol) {
    for (size_t i = 0; i < host.size(); ++i) {
      const std::vector<float> got = ToHost(device[i]);
      auto r = AllClose(got.data(), host[i].data(), got.size(), atol, rtol);
      if (!r) return r << " (snapshot after " << host_list[i].after_tokens << " tokens)";
    }
    return ::testing::AssertionSuccess();
  }
};

TEST(CudaSequenceKernelsTest, CausalConvMatchesReferenceWithSnapshots) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(1);
  for (int32_t channels : {1, 37, 300}) {
    for (int32_t kernel : {1, 2, 4, 8}) {
      for (int64_t tokens : {1, 5, 40}) {
        const bool silu = (channels + tokens) % 2 == 0, bias = kernel != 2;
        const int64_t ld = channels + 3, state_floats = int64_t{kernel - 1} * channels;
        const auto u = rng.Uniform(tokens * ld), w = rng.Uniform(int64_t{channels} * kernel),
                   b = rng.Uniform(channels), state0 = rng.Uniform(state_floats);
        SnapshotSet snaps(SnapshotPositions(tokens), state_floats);
        auto du = ToDevice(u), dw = ToDevice(w), db = ToDevice(b), dstate = ToDevice(state0);
        auto dout = ToDevice(std::vector<float>(tokens * ld, 0.0f));
        std::vector<float> state = state0, out(tokens * ld, 0.0f);
        CausalConvArgs a;
        a.tokens = tokens;
        a.channels = channels;
        a.kernel = kernel;
        a.silu = silu;
        a.ld_u = a.ld_out = ld;
        a.u = u.data();
        a.weight = w.data();
        a.bias = bias ? b.data() : nullptr;
        a.state = state.data();
        a.out = out.data();
        a.snapshots = snaps.host_list;
        ReferenceOps().CausalConv1d(a);
        a.u = du.get();
        a.weight = dw.get();
        a.bias = bias ? db.get() : nullptr;
        a.state = dstate.get();
        a.out = dout.get();
        a.snapshots = snaps.device_list;
        ASSERT_CUDA_OK(CausalConv1d(nullptr, a));
        SCOPED_TRACE(::testing::Message()
                     << "channels=" << channels << " kernel=" << kernel << " tokens=" << tokens);
        ASSERT_TRUE(AllClose(ToHost(dout), out, 1e-5f, 1e-5f));
        ASSERT_TRUE(AllClose(ToHost(dstate), state, 0.0f, 0.0f));
        ASSERT_TRUE(snaps.Match(0.0f, 0.0f));
      }
    }
  }
}

TEST(CudaSequenceKernelsTest, SelectiveScanMatchesReferenceWithSnapshots) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(2);
  for (int32_t inner : {1, 5, 70}) {
    for (int32_t n_state : {1, 16, 40, 100, 256}) {  // 1, 2, 4 and 8 states per lane
      for (int64_t tokens : {1, 9, 37}) {
        const bool gate = inner != 5;
        const int64_t ld = inner + 2, state_floats = int64_t{inner} * n_state;
        const auto u = rng.Uniform(tokens * ld), delta = rng.Uniform(tokens * ld, -3, 1),
                   dbias = rng.Uniform(inner, -1, 0), a_mat = rng.Uniform(state_floats, -2, -0.1f),
                   bm = rng.Uniform(tokens * n_state), cm = rng.Uniform(tokens * n_state),
                   d = rng.Uniform(inner), z = rng.Uniform(tokens * ld),
                   state0 = rng.Uniform(state_floats);
        SnapshotSet snaps(SnapshotPositions(tokens), state_floats);
        std::vector<float> state = state0, y(tokens * ld, 0.0f);
        SelectiveScanArgs a;
        a.tokens = tokens;
        a.inner = inner;
        a.state_size = n_state;
        a.ld_u = a.ld_delta = a.ld_z = a.ld_y = ld;
        a.ld_b = a.ld_c = n_state;
        a.u = u.data();
        a.delta = delta.data();
        a.delta_bias = dbias.data();
        a.a = a_mat.data();
        a.b = bm.data();
        a.c = cm.data();
        a.d = d.data();
        a.z = gate ? z.data() : nullptr;
        a.state = state.data();
        a.y = y.data();
        a.snapshots = snaps.host_list;
        ReferenceOps().SelectiveScan(a);
        auto du = ToDevice(u), ddelta = ToDevice(delta), ddbias = ToDevice(dbias),
             da = ToDevice(a_mat), db = ToDevice(bm), dc = ToDevice(cm), dd = ToDevice(d),
             dz = ToDevice(z), dstate = ToDevice(state0);
        auto dy = ToDevice(std::vector<float>(tokens * ld, 0.0f));
        a.u = du.get();
        a.delta = ddelta.get();
        a.delta_bias = ddbias.get();
        a.a = da.get();
        a.b = db.get();
        a.c = dc.get();
        a.d = dd.get();
        a.z = gate ? dz.get() : nullptr;
        a.state = dstate.get();
        a.y = dy.get();
        a.snapshots = snaps.device_list;
        ASSERT_CUDA_OK(SelectiveScan(nullptr, a));
        SCOPED_TRACE(::testing::Message()
                     << "inner=" << inner << " N=" << n_state << " tokens=" << tokens);
        ASSERT_TRUE(AllClose(ToHost(dy), y, 1e-4f, 1e-4f));
        ASSERT_TRUE(AllClose(ToHost(dstate), state, 1e-5f, 1e-5f));
        ASSERT_TRUE(snaps.Match(1e-5f, 1e-5f));
      }
    }
  }
}

TEST(CudaSequenceKernelsTest, SsdScanMatchesReferenceWithSnapshots) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(3);
  for (int32_t heads : {2, 4}) {
    for (int32_t head_dim : {1, 6, 8}) {  // 1, 2 and 4 rows per warp
      for (int32_t groups : {1, 2}) {
        for (int32_t n_state : {16, 64, 128, 130}) {  // 1, 2, 4 and 8 states per lane
          for (int64_t tokens : {1, 11, 37}) {
            const int64_t width = int64_t{heads} * head_dim;
            const int64_t state_floats = width * n_state, bc = int64_t{groups} * n_state;
            const auto x = rng.Uniform(tokens * width), dt = rng.Uniform(tokens * heads, -3, 1),
                       dt_bias = rng.Uniform(heads, -1, 0), a_vec = rng.Uniform(heads, -2, -0.1f),
                       bm = rng.Uniform(tokens * bc), cm = rng.Uniform(tokens * bc),
                       d = rng.Uniform(heads), state0 = rng.Uniform(state_floats);
            SnapshotSet snaps(SnapshotPositions(tokens), state_floats);
            std::vector<float> state = state0, y(tokens * width, 0.0f);
            SsdScanArgs a;
            a.tokens = tokens;
            a.heads = heads;
            a.head_dim = head_dim;
            a.groups = groups;
            a.state_size = n_state;
            a.ld_x = a.ld_y = width;
            a.ld_dt = heads;
            a.ld_b = a.ld_c = bc;
            a.dt_min = 0.001f;
            a.dt_max = n_state == 64 ? 0.1f : 0.0f;
            a.x = x.data();
            a.dt = dt.data();
            a.dt_bias = dt_bias.data();
            a.a = a_vec.data();
            a.b = bm.data();
            a.c = cm.data();
            a.d = d.data();
            a.state = state.data();
            a.y = y.data();
            a.snapshots = snaps.host_list;
            Workspace ws;
            ReferenceOps().SsdScan(a, ws);
            auto dx = ToDevice(x), ddt = ToDevice(dt), ddtb = ToDevice(dt_bias),
                 da = ToDevice(a_vec), db = ToDevice(bm), dc = ToDevice(cm), dd = ToDevice(d),
                 dstate = ToDevice(state0);
            auto dy = ToDevice(std::vector<float>(tokens * width, 0.0f));
            a.x = dx.get();
            a.dt = ddt.get();
            a.dt_bias = ddtb.get();
            a.a = da.get();
            a.b = db.get();
            a.c = dc.get();
            a.d = dd.get();
            a.state = dstate.get();
            a.y = dy.get();
            a.snapshots = snaps.device_list;
            ASSERT_CUDA_OK(SsdScan(nullptr, a));
            SCOPED_TRACE(::testing::Message()
                         << "heads=" << heads << " P=" << head_dim << " groups=" << groups
                         << " N=" << n_state << " tokens=" << tokens);
            ASSERT_TRUE(AllClose(ToHost(dy), y, 1e-4f, 1e-4f));
            ASSERT_TRUE(AllClose(ToHost(dstate), state, 1e-5f, 1e-5f));
            ASSERT_TRUE(snaps.Match(1e-5f, 1e-5f));
          }
        }
      }
    }
  }
}

// A prefill's rows per warp: 1, 2 or 4, and for the SSD a divisor of the head dimension (a
// warp's rows are one head's). Others are refused before anything runs.
TEST(CudaSequenceKernelsTest, ScansRefuseRowsPerWarpTheyCannotTake) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(4);
  const int64_t tokens = 5;
  const int32_t heads = 2, head_dim = 6, n_state = 16;
  const int64_t width = int64_t{heads} * head_dim;
  auto x = ToDevice(rng.Uniform(tokens * width)), dt = ToDevice(rng.Uniform(tokens * heads)),
       per_head = ToDevice(rng.Uniform(heads, -1, -0.1f)),
       bc = ToDevice(rng.Uniform(tokens * n_state)), state = ToDevice(rng.Uniform(width * n_state)),
       y = ToDevice(std::vector<float>(tokens * width, 0.0f));
  SsdScanArgs a;
  a.tokens = tokens;
  a.heads = heads;
  a.head_dim = head_dim;
  a.groups = 1;
  a.state_size = n_state;
  a.ld_x = a.ld_y = width;
  a.ld_dt = heads;
  a.ld_b = a.ld_c = n_state;
  a.x = x.get();
  a.dt = dt.get();
  a.dt_bias = a.a = a.d = per_head.get();
  a.b = a.c = bc.get();
  a.state = state.get();
  a.y = y.get();
  const std::vector<float> before = ToHost(state);
  EXPECT_EQ(SsdScanWithRowsPerWarp(nullptr, a, 4), cudaErrorInvalidValue);  // 4 ∤ 6
  EXPECT_EQ(SsdScanWithRowsPerWarp(nullptr, a, 3), cudaErrorInvalidValue);
  SsdScanArgs one_token = a;  // a decode step runs one row per warp, but a bad count is bad
  one_token.tokens = 1;
  EXPECT_EQ(SsdScanWithRowsPerWarp(nullptr, one_token, 4), cudaErrorInvalidValue);
  EXPECT_TRUE(AllClose(ToHost(state), before, 0.0f, 0.0f)) << "a refused call ran";
  EXPECT_EQ(SsdScanWithRowsPerWarp(nullptr, a, 2), cudaSuccess);

  SelectiveScanArgs s;
  s.tokens = tokens;
  s.inner = static_cast<int32_t>(width);
  s.state_size = n_state;
  s.ld_u = s.ld_delta = s.ld_y = width;
  s.ld_b = s.ld_c = n_state;
  auto a_mat = ToDevice(rng.Uniform(width * n_state, -2, -0.1f)),
       per_channel = ToDevice(rng.Uniform(width));
  s.u = s.delta = x.get();
  s.delta_bias = s.d = per_channel.get();
  s.a = a_mat.get();
  s.b = s.c = bc.get();
  s.state = state.get();
  s.y = y.get();
  EXPECT_EQ(SelectiveScanWithRowsPerWarp(nullptr, s, 8), cudaErrorInvalidValue);
  EXPECT_EQ(SelectiveScanWithRowsPerWarp(nullptr, s, -1), cudaErrorInvalidValue);
  SelectiveScanArgs one_token_scan = s;
  one_token_scan.tokens = 1;
  EXPECT_EQ(SelectiveScanWithRowsPerWarp(nullptr, one_token_scan, 8), cudaErrorInvalidValue);
  EXPECT_EQ(SelectiveScanWithRowsPerWarp(nullptr, s, 4), cudaSuccess);
}

// A paged KV cache of `pages` pages, laid out as on the CPU, twice: in host memory for the
// reference and in device memory with a device page table.
struct PagedCache {
  std::vector<float> host;
  std::vector<float*> host_pages;
  DeviceBuffer<float> device;
  DeviceBuffer<float*> device_pages;
  PagedKv host_kv, device_kv;

  PagedCache(int64_t pages, int32_t page_tokens, int32_t kv_heads, int32_t head_dim) {
    // Two attention layers per page; the second one's offset is the one used.
    const int64_t layer_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
    const int64_t page_floats = 2 * layer_floats;
    host.assign(pages * page_floats, 0.0f);
    device = ToDevice(host);
    std::vector<float*> dpages;
    for (int64_t p = 0; p < pages; ++p) {
      // Pages out of order, as an allocator hands them out.
      const int64_t slot = (p * 5) % pages;
      host_pages.push_back(host.data() + slot * page_floats);
      dpages.push_back(device.get() + slot * page_floats);
    }
    device_pages = ToDevice(dpages);
    for (PagedKv* kv : {&host_kv, &device_kv}) {
      kv->page_tokens = page_tokens;
      kv->num_kv_heads = kv_heads;
      kv->head_dim = head_dim;
      kv->layer_offset = layer_floats;
    }
    host_kv.pages = host_pages.data();
    device_kv.pages = device_pages.get();
  }
};

// Log-sum-exps within tol · (1 + |want|); −inf (an empty key range) exactly.
::testing::AssertionResult LseClose(const std::vector<float>& got, const std::vector<float>& want,
                                    float tol) {
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::isinf(want[i])
                        ? got[i] == want[i]
                        : std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i]));
    if (!ok) {
      return ::testing::AssertionFailure()
             << "lse " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaSequenceKernelsTest, PagedWriteAndRangeAttentionMatchReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(4);
  // Enough positions that calls over a thousand keys split them (on the tensor cores too).
  const int32_t page_tokens = 16, kv_heads = 2, heads = 6, positions = 1290;
  // 32 or more rows × query heads per KV head take the tensor-core kernel at head_dim 64, 80,
  // 96 and 128, 16 or more the tiled CUDA-core kernel up to 128 (32 here); fewer rows, or 160,
  // a block per (row, KV head), or a warp per (row, query head).
  for (int32_t head_dim : {32, 64, 80, 96, 128, 160}) {
    PagedCache cache(81, page_tokens, kv_heads, head_dim);  // 1,296 positions (5 is prime to 81)
    const int64_t kv_width = int64_t{kv_heads} * head_dim, q_width = int64_t{heads} * head_dim;
    const auto k = rng.Uniform(positions * kv_width), v = rng.Uniform(positions * kv_width);
    // Two writes, the second continuing mid-page.
    auto dk = ToDevice(k), dv = ToDevice(v);
    for (auto [start, count] : {std::pair<int64_t, int64_t>{0, 21}, {21, positions - 21}}) {
      ReferenceOps().WriteKv(k.data() + start * kv_width, kv_width, v.data() + start * kv_width,
                             kv_width, count, start, cache.host_kv);
      ASSERT_CUDA_OK(WriteKv(nullptr, dk.get() + start * kv_width, kv_width,
                             dv.get() + start * kv_width, kv_width, count, start, cache.device_kv));
    }
    ASSERT_TRUE(AllClose(ToHost(cache.device), cache.host, 0.0f, 0.0f)) << "pages differ";

    struct Range {
      int64_t rows, start_pos;
      bool causal;
      int64_t begin, end;
    };
    for (const Range r :
         {Range{9, 41, true, 0, 50}, Range{1, 49, true, 0, 50}, Range{5, 50, false, 16, 37},
          Range{3, 50, false, 20, 20}, Range{40, 10, true, 0, 50}, Range{40, 50, false, 3, 47},
          Range{13, 50, false, 20, 20}, Range{40, 1290, false, 100, 1290},
          Range{40, 1250, true, 0, 1290}, Range{2, 1290, false, 7, 1290}}) {
      const auto q = rng.Uniform(r.rows * q_width);
      std::vector<float> out(r.rows * q_width), lse(r.rows * heads);
      PartialAttentionArgs a;
      a.rows = r.rows;
      a.start_pos = r.start_pos;
      a.causal = r.causal;
      a.heads = heads;
      a.ld_q = a.ld_out = q_width;
      a.ld_lse = heads;
      a.key_begin = r.begin;
      a.key_end = r.end;
      a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      a.q = q.data();
      a.kv = cache.host_kv;
      a.out = out.data();
      a.lse = lse.data();
      Workspace ws;
      ReferenceOps().PartialAttention(a, ws);
      auto dq = ToDevice(q);
      a.q = dq.get();
      a.kv = cache.device_kv;
      // Untiled calls also with their keys split (into more splits than some rows have keys:
      // those parts are empty) and merged.
      const bool splittable = PartialAttentionSplits(a, 1 << 20) > 1;
      for (const int count : {1, 3, kMaxKeySplits}) {
        if (count > 1 && !splittable) continue;
        auto dout = ToDevice(std::vector<float>(out.size(), 9.0f)),
             dlse = ToDevice(std::vector<float>(lse.size(), 9.0f));
        auto dparts = ToDevice(
                 std::vector<float>(KeySplits::OutFloats(count, r.rows, heads, head_dim), 7.0f)),
             dparts_lse =
                 ToDevice(std::vector<float>(KeySplits::LseFloats(count, r.rows, heads), 7.0f));
        a.out = dout.get();
        a.lse = dlse.get();
        ASSERT_CUDA_OK(PartialAttention(nullptr, a, {count, dparts.get(), dparts_lse.get()}));
        SCOPED_TRACE(::testing::Message()
                     << "head_dim=" << head_dim << " rows=" << r.rows << " keys [" << r.begin
                     << ", " << r.end << ") in " << count << " splits");
        ASSERT_TRUE(AllClose(ToHost(dout), out, 1e-5f, 1e-4f));
        ASSERT_TRUE(LseClose(ToHost(dlse), lse, 1e-4f));
      }
      // On a GPU whose blocks cannot have the tensor-core tile's shared memory (sm_86 / sm_89:
      // 99 KB), the head dims up to 96 still take it and 128 the CUDA-core tiles: the same
      // results either way.
      if (MmaAttentionTakes(a)) {
        const ScopedBlockSharedMemoryLimit sm86(99 << 10);
        auto dout = ToDevice(std::vector<float>(out.size(), 9.0f)),
             dlse = ToDevice(std::vector<float>(lse.size(), 9.0f));
        a.out = dout.get();
        a.lse = dlse.get();
        ASSERT_CUDA_OK(PartialAttention(nullptr, a));
        SCOPED_TRACE(::testing::Message() << "99 KB, head_dim=" << head_dim << " rows=" << r.rows
                                          << " keys [" << r.begin << ", " << r.end << ")");
        EXPECT_TRUE(AllClose(ToHost(dout), out, 1e-5f, 1e-4f));
        EXPECT_TRUE(LseClose(ToHost(dlse), lse, 1e-4f));
      }
      // The tensor cores at TF32 (--gpu-tensor-cores): q, k, p and v keep 11 significant bits,
      // so each product moves by up to ~2^-10 of its size; scores (|q·k|·scale of order 1 here)
      // and the outputs (weighted means of values in [-1, 1]) move by a few 1e-3.
      if (MmaAttentionTakes(a)) {
        auto dout = ToDevice(std::vector<float>(out.size(), 9.0f)),
             dlse = ToDevice(std::vector<float>(lse.size(), 9.0f));
        a.out = dout.get();
        a.lse = dlse.get();
        ASSERT_CUDA_OK(PartialAttention(nullptr, a, {}, TensorCorePrecision::kTf32));
        SCOPED_TRACE(::testing::Message() << "TF32, head_dim=" << head_dim << " rows=" << r.rows
                                          << " keys [" << r.begin << ", " << r.end << ")");
        EXPECT_TRUE(AllClose(ToHost(dout), out, 1e-2f, 1e-2f));
        EXPECT_TRUE(LseClose(ToHost(dlse), lse, 1e-2f));
      }
    }
  }
}

TEST(CudaSequenceKernelsTest, MergeMatchesReferenceIncludingEmptyParts) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(5);
  const int64_t rows = 7;
  const int32_t heads = 3, head_dim = 40, width = heads * head_dim;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> outs, lses;
  for (int i = 0; i < 3; ++i) {
    outs.push_back(rng.Uniform(rows * width));
    lses.push_back(rng.Uniform(rows * heads, -5, 5));
  }
  lses[1][4] = neg_inf;                              // one part empty for one row and head
  for (int i = 0; i < 3; ++i) lses[i][7] = neg_inf;  // every part empty there
  std::vector<AttentionPart> host_parts, device_parts;
  std::vector<DeviceBuffer<float>> keep;
  for (int i = 0; i < 3; ++i) {
    host_parts.push_back({outs[i].data(), width, lses[i].data(), heads});
    keep.push_back(ToDevice(outs[i]));
    keep.push_back(ToDevice(lses[i]));
    device_parts.push_back({keep[2 * i].get(), width, keep[2 * i + 1].get(), heads});
  }
  std::vector<float> out(rows * width), lse(rows * heads);
  ReferenceOps().MergeAttention(host_parts, rows, heads, head_dim, out.data(), width, lse.data(),
                                heads);
  auto dout = ToDevice(std::vector<float>(out.size())),
       dlse = ToDevice(std::vector<float>(lse.size()));
  ASSERT_CUDA_OK(MergeAttention(nullptr, device_parts, rows, heads, head_dim, dout.get(), width,
                                dlse.get(), heads));
  ASSERT_TRUE(AllClose(ToHost(dout), out, 1e-6f, 1e-5f));
  ASSERT_TRUE(LseClose(ToHost(dlse), lse, 1e-5f));
  // In place over the first part, as the Hydragen path merges.
  ASSERT_CUDA_OK(MergeAttention(nullptr, device_parts, rows, heads, head_dim, keep[0].get(), width,
                                nullptr, 0));
  ASSERT_TRUE(AllClose(ToHost(keep[0]), out, 1e-6f, 1e-5f));
  // An lse that aliases a part's is refused (other threads may still read it).
  EXPECT_EQ(MergeAttention(nullptr, device_parts, rows, heads, head_dim, dout.get(), width,
                           keep[1].get(), heads),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace tandem::kernels::cuda
