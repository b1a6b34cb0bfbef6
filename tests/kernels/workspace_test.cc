// Steady state allocates nothing: after warm-up, a pass of CpuOps ops with a Workspace reset
// between passes neither grows the Workspace nor calls operator new.
#include "kernels/workspace.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tests/kernels/test_util.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

// Counting replacements for the global allocation functions of this test binary. They pair
// malloc with free; GCC takes the replaced operators for the library's and warns of a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace tandem::kernels {
namespace {

using testing::Rng;

TEST(WorkspaceTest, AlignsAndMergesBlocksOnReset) {
  Workspace ws(256);
  float* a = ws.Floats(3);
  float* b = ws.Floats(1000);  // does not fit: second block
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_GT(ws.capacity_bytes(), 256u);
  const size_t high = ws.high_water_bytes();
  ws.Reset();
  EXPECT_EQ(ws.capacity_bytes(), high);  // one block for the whole high-water mark
  ws.Floats(3);
  ws.Floats(1000);
  EXPECT_EQ(ws.capacity_bytes(), high);
}

// A forward pass gives each layer's scratch back with Rewind. A layer that overflows the block
// must still make Reset merge, or every later pass allocates and frees a block per layer (the
// heap churn that fragmented the engine thread's arena under sustained load).
TEST(WorkspaceTest, RewoundOverflowIsMergedSoLaterPassesTakeNoBlocks) {
  Workspace ws(256);
  auto pass = [&] {
    ws.Reset();
    ws.Floats(16);
    for (int layer = 0; layer < 4; ++layer) {
      const Workspace::Mark mark = ws.GetMark();
      ws.Floats(100);
      ws.Floats(1000);  // more than the first block holds
      ws.Rewind(mark);
    }
  };
  pass();
  pass();  // merged at this Reset
  const size_t blocks = ws.blocks_allocated();
  const size_t capacity = ws.capacity_bytes();
  for (int i = 0; i < 10; ++i) pass();
  EXPECT_EQ(ws.blocks_allocated(), blocks);
  EXPECT_EQ(ws.capacity_bytes(), capacity);
}

TEST(WorkspaceTest, CpuOpsStopAllocatingAfterWarmUp) {
  CpuOps cpu(2);
  Rng rng(1);
  // A miniature of one hybrid step: gated MLP, MoE, SSD prefill with snapshots, attention.
  const int T = 33, H = 48, I = 40, E = 4, heads = 4, P = 12, N = 8, dh = 12;
  auto x = rng.Uniform(T * H), gu = rng.Uniform(2 * I * H), down = rng.Uniform(H * I);
  auto router = rng.Uniform(E * H);
  const WeightMatrix gu_w = WeightMatrix::F32(gu.data(), 2 * I, H);
  const WeightMatrix down_w = WeightMatrix::F32(down.data(), H, I);
  std::vector<WeightMatrix> gu_ptr(E, gu_w), down_ptr(E, down_w);
  std::vector<float> out(T * H);
  auto sx = rng.Uniform(T * heads * P), sdt = rng.Uniform(T * heads), bias = rng.Uniform(heads);
  auto sa = rng.Uniform(heads, -2, -0.5f), sb = rng.Uniform(T * N), sd = rng.Uniform(heads);
  std::vector<float> state(heads * P * N), snap(heads * P * N), y(T * heads * P);
  StateSnapshot snaps[] = {{10, snap.data()}};
  std::vector<float> page_mem(3 * 2 * 2 * 16 * dh);
  std::vector<float*> pages = {page_mem.data(), page_mem.data() + 2 * 2 * 16 * dh,
                               page_mem.data() + 2 * 2 * 2 * 16 * dh};
  PagedKv kv;
  kv.pages = pages.data();
  kv.page_tokens = 16;
  kv.num_kv_heads = 2;
  kv.head_dim = dh;
  auto q = rng.Uniform(T * heads * dh), kvv = rng.Uniform(T * 2 * dh);
  std::vector<float> attn(T * heads * dh);
  Workspace ws(64);

  auto pass = [&] {
    ws.Reset();
    cpu.GatedMlp(Activation::kSilu, x.data(), H, T, gu_w, down_w, out.data(), H, ws);
    MoeArgs m;
    m.tokens = T;
    m.hidden = H;
    m.intermediate = I;
    m.num_experts = E;
    m.top_k = 2;
    m.x = x.data();
    m.ld_x = H;
    m.router = WeightMatrix::F32(router.data(), E, H);
    m.gate_up = gu_ptr.data();
    m.down = down_ptr.data();
    m.out = out.data();
    m.ld_out = H;
    cpu.Moe(m, ws);
    SsdScanArgs s;
    s.tokens = T;
    s.heads = heads;
    s.head_dim = P;
    s.groups = 1;
    s.state_size = N;
    s.chunk_size = 8;
    s.x = sx.data();
    s.ld_x = heads * P;
    s.dt = sdt.data();
    s.ld_dt = heads;
    s.dt_bias = bias.data();
    s.a = sa.data();
    s.b = sb.data();
    s.ld_b = N;
    s.c = sb.data();
    s.ld_c = N;
    s.d = sd.data();
    s.state = state.data();
    s.y = y.data();
    s.ld_y = heads * P;
    s.snapshots = snaps;
    cpu.SsdScan(s, ws);
    cpu.WriteKv(kvv.data(), 2 * dh, kvv.data(), 2 * dh, T, 0, kv);
    AttentionArgs a;
    a.tokens = T;
    a.heads = heads;
    a.q = q.data();
    a.ld_q = heads * dh;
    a.kv = kv;
    a.out = attn.data();
    a.ld_out = heads * dh;
    cpu.Attention(a, ws);
    cpu.Linear(x.data(), H, 1, WeightMatrix::F32(gu.data(), 2 * I, H), nullptr, out.data(), 2 * I);
  };
  g_counting = true;
  pass();  // warm-up grows the 64-byte workspace: the counter must see it
  g_counting = false;
  EXPECT_GT(g_allocations.load(), 0);
  pass();
  const size_t capacity = ws.capacity_bytes();
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 5; ++i) pass();
  g_counting = false;
  EXPECT_EQ(ws.capacity_bytes(), capacity);
  EXPECT_EQ(g_allocations.load(), 0);
}

}  // namespace
}  // namespace tandem::kernels
