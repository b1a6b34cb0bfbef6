// The recurrent ops: CpuOps vs ReferenceOps, the chunked SSD against the token-by-token
// recurrence, snapshots, and split-into-two-calls ≡ one call.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/scalar_math.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::AllCloseStrided;
using testing::Rng;

// ---- Causal conv1d ----------------------------------------------------------------------------

struct ConvCase {
  int64_t tokens;
  int32_t channels, kernel;
  bool silu, bias;
};

struct ConvData {
  ConvData(const ConvCase& c, uint32_t seed) : c(c) {
    Rng rng(seed);
    ld_u = c.channels + 3;
    ld_out = c.channels + 1;
    u = rng.Uniform(c.tokens * ld_u, -2, 2);
    weight = rng.Uniform(int64_t{c.channels} * c.kernel);
    bias = rng.Uniform(c.channels);
    state0 = rng.Uniform(int64_t{c.kernel - 1} * c.channels);
  }
  CausalConvArgs Args(float* state, float* out) const {
    CausalConvArgs a;
    a.tokens = c.tokens;
    a.channels = c.channels;
    a.kernel = c.kernel;
    a.u = u.data();
    a.ld_u = ld_u;
    a.weight = weight.data();
    a.bias = c.bias ? bias.data() : nullptr;
    a.silu = c.silu;
    a.state = state;
    a.out = out;
    a.ld_out = ld_out;
    return a;
  }
  ConvCase c;
  int64_t ld_u, ld_out;
  std::vector<float> u, weight, bias, state0;
};

TEST(ReferenceOpsTest, ConvKnownValues) {
  // One channel, K = 3, weights (1, 10, 100): out_t = u_{t-2} + 10·u_{t-1} + 100·u_t.
  ReferenceOps ref;
  float state[2] = {1, 2}, u[2] = {3, 4}, w[3] = {1, 10, 100}, out[2], snap[2];
  StateSnapshot snaps[] = {{1, snap}};
  CausalConvArgs a;
  a.tokens = 2;
  a.channels = 1;
  a.kernel = 3;
  a.u = u;
  a.ld_u = 1;
  a.weight = w;
  a.silu = false;
  a.state = state;
  a.out = out;
  a.ld_out = 1;
  a.snapshots = snaps;
  ref.CausalConv1d(a);
  EXPECT_FLOAT_EQ(out[0], 1 + 20 + 300);
  EXPECT_FLOAT_EQ(out[1], 2 + 30 + 400);
  EXPECT_FLOAT_EQ(state[0], 3);
  EXPECT_FLOAT_EQ(state[1], 4);
  EXPECT_FLOAT_EQ(snap[0], 2);
  EXPECT_FLOAT_EQ(snap[1], 3);
}

class ConvTest : public ::testing::TestWithParam<std::tuple<int64_t, int32_t>> {};

TEST_P(ConvTest, MatchesReferenceWithSnapshots) {
  const auto [tokens, kernel] = GetParam();
  for (bool silu : {true, false}) {
    ConvData d({tokens, 131, kernel, silu, silu}, static_cast<uint32_t>(tokens * 10 + kernel));
    const int64_t state_len = int64_t{kernel - 1} * 131;
    std::vector<int64_t> positions = {0, tokens / 2, tokens};
    if (tokens >= 2) positions = {0, 1, tokens / 2, tokens - 1, tokens};
    std::vector<std::vector<float>> want_snap(positions.size(), std::vector<float>(state_len)),
        got_snap = want_snap;
    std::vector<StateSnapshot> ws, gs;
    for (size_t i = 0; i < positions.size(); ++i) {
      ws.push_back({positions[i], want_snap[i].data()});
      gs.push_back({positions[i], got_snap[i].data()});
    }
    auto want_state = d.state0, got_state = d.state0;
    std::vector<float> want(tokens * d.ld_out), got(tokens * d.ld_out);
    auto a = d.Args(want_state.data(), want.data());
    a.snapshots = ws;
    ReferenceOps().CausalConv1d(a);
    a = d.Args(got_state.data(), got.data());
    a.snapshots = gs;
    CpuOps(2).CausalConv1d(a);
    EXPECT_TRUE(AllCloseStrided(got, want, tokens, 131, d.ld_out, 1e-6f, 1e-5f));
    EXPECT_TRUE(AllClose(got_state, want_state, 0, 0));
    for (size_t i = 0; i < positions.size(); ++i) {
      EXPECT_TRUE(AllClose(got_snap[i], want_snap[i], 0, 0)) << "snapshot at " << positions[i];
    }
  }
}

TEST_P(ConvTest, TwoCallsEqualOne) {
  const auto [tokens, kernel] = GetParam();
  if (tokens < 2) GTEST_SKIP();
  ConvData d({tokens, 50, kernel, true, true}, 99);
  CpuOps cpu(2);
  auto one_state = d.state0;
  std::vector<float> one(tokens * d.ld_out), two(tokens * d.ld_out);
  cpu.CausalConv1d(d.Args(one_state.data(), one.data()));
  for (int64_t split : {int64_t{1}, tokens / 2, tokens - 1}) {
    auto state = d.state0;
    auto a = d.Args(state.data(), two.data());
    a.tokens = split;
    cpu.CausalConv1d(a);
    a.u += split * d.ld_u;
    a.out += split * d.ld_out;
    a.tokens = tokens - split;
    cpu.CausalConv1d(a);
    EXPECT_TRUE(AllCloseStrided(two, one, tokens, 50, d.ld_out, 0, 0)) << "split " << split;
    EXPECT_TRUE(AllClose(state, one_state, 0, 0));
  }
}

TEST_P(ConvTest, StepEqualsPrefillToken) {
  const auto [tokens, kernel] = GetParam();
  ConvData d({tokens, 70, kernel, true, true}, 5);
  CpuOps cpu(2);
  ReferenceOps ref;
  auto state_step = d.state0, state_ref = d.state0;
  std::vector<float> out_step(tokens * d.ld_out), out_ref(tokens * d.ld_out);
  std::vector<float> snap0((kernel - 1) * 70), snap1((kernel - 1) * 70);
  for (int64_t t = 0; t < tokens; ++t) {
    auto a = d.Args(state_step.data(), out_step.data() + t * d.ld_out);
    a.tokens = 1;
    a.u += t * d.ld_u;
    StateSnapshot snaps[] = {{0, snap0.data()}, {1, snap1.data()}};
    a.snapshots = snaps;
    auto before = state_step;
    cpu.CausalConv1dStep(a);
    EXPECT_TRUE(AllClose(snap0, before, 0, 0));
    EXPECT_TRUE(AllClose(snap1, state_step, 0, 0));
  }
  ref.CausalConv1d(d.Args(state_ref.data(), out_ref.data()));
  EXPECT_TRUE(AllCloseStrided(out_step, out_ref, tokens, 70, d.ld_out, 1e-6f, 1e-5f));
  EXPECT_TRUE(AllClose(state_step, state_ref, 0, 0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 17, 100),
                                            ::testing::Values(2, 4)));

// ---- Mamba-1 selective scan -------------------------------------------------------------------

struct ScanData {
  ScanData(int64_t tokens, int32_t inner, int32_t n, bool gate, uint32_t seed)
      : tokens(tokens), inner(inner), n(n), gate(gate) {
    Rng rng(seed);
    ld = inner + 5;
    ld_bc = n + 2;
    u = rng.Uniform(tokens * ld);
    delta = rng.Uniform(tokens * ld, -4, 2);
    delta_bias = rng.Uniform(inner, -1, 1);
    a = rng.Uniform(int64_t{inner} * n, -3, -0.05f);
    b = rng.Uniform(tokens * ld_bc);
    c = rng.Uniform(tokens * ld_bc);
    d = rng.Uniform(inner);
    z = rng.Uniform(tokens * ld, -3, 3);
    state0 = rng.Uniform(int64_t{inner} * n);
  }
  SelectiveScanArgs Args(float* state, float* y) const {
    SelectiveScanArgs s;
    s.tokens = tokens;
    s.inner = inner;
    s.state_size = n;
    s.u = u.data();
    s.ld_u = ld;
    s.delta = delta.data();
    s.ld_delta = ld;
    s.delta_bias = delta_bias.data();
    s.a = a.data();
    s.b = b.data();
    s.ld_b = ld_bc;
    s.c = c.data();
    s.ld_c = ld_bc;
    s.d = d.data();
    s.z = gate ? z.data() : nullptr;
    s.ld_z = ld;
    s.state = state;
    s.y = y;
    s.ld_y = ld;
    return s;
  }
  int64_t tokens;
  int32_t inner, n;
  bool gate;
  int64_t ld, ld_bc;
  std::vector<float> u, delta, delta_bias, a, b, c, d, z, state0;
};

class SelectiveScanTest : public ::testing::TestWithParam<std::tuple<int64_t, int32_t, bool>> {};

TEST_P(SelectiveScanTest, MatchesReferenceWithSnapshots) {
  const auto [tokens, n, gate] = GetParam();
  ScanData d(tokens, 37, n, gate, static_cast<uint32_t>(tokens + n));
  const int64_t sl = 37 * n;
  std::vector<int64_t> positions = {0, tokens / 3, tokens};
  std::vector<std::vector<float>> want_snap(3, std::vector<float>(sl)), got_snap = want_snap;
  std::vector<StateSnapshot> ws, gs;
  for (int i = 0; i < 3; ++i) {
    ws.push_back({positions[i], want_snap[i].data()});
    gs.push_back({positions[i], got_snap[i].data()});
  }
  auto want_state = d.state0, got_state = d.state0;
  std::vector<float> want(tokens * d.ld), got(tokens * d.ld);
  auto a = d.Args(want_state.data(), want.data());
  a.snapshots = ws;
  ReferenceOps().SelectiveScan(a);
  a = d.Args(got_state.data(), got.data());
  a.snapshots = gs;
  CpuOps cpu(3);
  if (tokens == 1) {
    cpu.SelectiveStateUpdate(a);
  } else {
    cpu.SelectiveScan(a);
  }
  EXPECT_TRUE(AllCloseStrided(got, want, tokens, 37, d.ld, 1e-5f, 1e-4f));
  EXPECT_TRUE(AllClose(got_state, want_state, 1e-5f, 1e-4f));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(AllClose(got_snap[i], want_snap[i], 1e-5f, 1e-4f)) << positions[i];
  }
  EXPECT_TRUE(AllClose(want_snap[0], d.state0, 0, 0));
  EXPECT_TRUE(AllClose(want_snap[2], want_state, 0, 0));
}

TEST_P(SelectiveScanTest, TwoCallsEqualOne) {
  const auto [tokens, n, gate] = GetParam();
  if (tokens < 2) GTEST_SKIP();
  ScanData d(tokens, 37, n, gate, 3);
  CpuOps cpu(2);
  auto one_state = d.state0, two_state = d.state0;
  std::vector<float> one(tokens * d.ld), two(tokens * d.ld);
  cpu.SelectiveScan(d.Args(one_state.data(), one.data()));
  const int64_t split = tokens / 2;
  auto a = d.Args(two_state.data(), two.data());
  a.tokens = split;
  cpu.SelectiveScan(a);
  a.tokens = tokens - split;
  a.u += split * d.ld;
  a.delta += split * d.ld;
  a.b += split * d.ld_bc;
  a.c += split * d.ld_bc;
  a.z = a.z ? a.z + split * d.ld : nullptr;
  a.y += split * d.ld;
  cpu.SelectiveScan(a);
  EXPECT_TRUE(AllCloseStrided(two, one, tokens, 37, d.ld, 0, 0));
  EXPECT_TRUE(AllClose(two_state, one_state, 0, 0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SelectiveScanTest,
                         ::testing::Combine(::testing::Values(1, 2, 9, 64),
                                            ::testing::Values(5, 16), ::testing::Bool()));

// ---- Mamba-2 SSD ------------------------------------------------------------------------------

struct SsdData {
  SsdData(int64_t tokens, int32_t heads, int32_t head_dim, int32_t groups, int32_t n, uint32_t seed)
      : tokens(tokens), heads(heads), head_dim(head_dim), groups(groups), n(n) {
    Rng rng(seed);
    ld_x = int64_t{heads} * head_dim + 3;
    ld_dt = heads + 1;
    ld_bc = int64_t{groups} * n + 2;
    x = rng.Uniform(tokens * ld_x);
    dt = rng.Uniform(tokens * ld_dt, -5, 1);
    dt_bias = rng.Uniform(heads, -1, 1);
    a = rng.Uniform(heads, -4, -0.1f);
    b = rng.Uniform(tokens * ld_bc);
    c = rng.Uniform(tokens * ld_bc);
    d = rng.Uniform(heads);
    state0 = rng.Uniform(int64_t{heads} * head_dim * n);
  }
  int64_t state_len() const { return int64_t{heads} * head_dim * n; }
  SsdScanArgs Args(float* state, float* y, int32_t chunk) const {
    SsdScanArgs s;
    s.tokens = tokens;
    s.heads = heads;
    s.head_dim = head_dim;
    s.groups = groups;
    s.state_size = n;
    s.chunk_size = chunk;
    s.x = x.data();
    s.ld_x = ld_x;
    s.dt = dt.data();
    s.ld_dt = ld_dt;
    s.dt_bias = dt_bias.data();
    s.a = a.data();
    s.b = b.data();
    s.ld_b = ld_bc;
    s.c = c.data();
    s.ld_c = ld_bc;
    s.d = d.data();
    s.state = state;
    s.y = y;
    s.ld_y = ld_x;
    return s;
  }
  int64_t tokens;
  int32_t heads, head_dim, groups, n;
  int64_t ld_x, ld_dt, ld_bc;
  std::vector<float> x, dt, dt_bias, a, b, c, d, state0;
};

TEST(ReferenceOpsTest, SsdSingleStepKnownValues) {
  // One head, P = 1, N = 2, dt_raw + bias = 0 ⇒ dt = ln 2; A = -1 ⇒ decay = 1/2.
  ReferenceOps ref;
  float x = 2, dtr = 0, dtb = 0, a = -1, b[2] = {1, 3}, c[2] = {1, -1}, d = 0.5f;
  float state[2] = {4, 8}, y = 0;
  SsdScanArgs s;
  s.tokens = 1;
  s.heads = s.head_dim = s.groups = 1;
  s.state_size = 2;
  s.x = &x;
  s.dt = &dtr;
  s.dt_bias = &dtb;
  s.a = &a;
  s.b = b;
  s.c = c;
  s.d = &d;
  s.state = state;
  s.y = &y;
  ref.SsdStateUpdate(s);
  const float dt = std::log(2.0f);
  EXPECT_NEAR(state[0], 2 + dt * 2 * 1, 1e-6);
  EXPECT_NEAR(state[1], 4 + dt * 2 * 3, 1e-6);
  EXPECT_NEAR(y, state[0] - state[1] + 1, 1e-6);
}

class SsdTest : public ::testing::TestWithParam<std::tuple<int64_t, int32_t, int32_t, int32_t>> {};

TEST_P(SsdTest, ChunkedMatchesRecurrenceWithSnapshots) {
  const auto [tokens, chunk, groups, n] = GetParam();
  const int32_t heads = 4, head_dim = 6;
  SsdData d(tokens, heads, head_dim, groups, n, static_cast<uint32_t>(tokens * 7 + chunk));
  // Positions: 0, T, chunk boundaries, one before and after them, and the middle.
  std::vector<int64_t> positions;
  for (int64_t p = 0; p <= tokens; ++p) {
    const int64_t r = p % chunk;
    if (p == 0 || p == tokens || r == 0 || r == 1 || r == chunk - 1 || p == tokens / 2) {
      positions.push_back(p);
    }
  }
  const int64_t sl = d.state_len();
  std::vector<std::vector<float>> want_snap(positions.size(), std::vector<float>(sl)),
      got_snap = want_snap;
  std::vector<StateSnapshot> wsn, gsn;
  for (size_t i = 0; i < positions.size(); ++i) {
    wsn.push_back({positions[i], want_snap[i].data()});
    gsn.push_back({positions[i], got_snap[i].data()});
  }
  for (float dt_max : {0.0f, 0.05f}) {
    auto want_state = d.state0, got_state = d.state0;
    std::vector<float> want(tokens * d.ld_x, 5.0f), got(tokens * d.ld_x, 5.0f);
    Workspace ws;
    auto a = d.Args(want_state.data(), want.data(), chunk);
    a.dt_min = 0.002f;
    a.dt_max = dt_max;
    a.snapshots = wsn;
    ReferenceOps().SsdScan(a, ws);
    a.state = got_state.data();
    a.y = got.data();
    a.snapshots = gsn;
    CpuOps cpu(3);
    cpu.set_ssd_max_chunk(1 << 20);  // exactly the requested chunks
    cpu.SsdScan(a, ws);
    EXPECT_TRUE(AllClose(got, want, 2e-5f, 1e-4f)) << "dt_max " << dt_max;
    EXPECT_TRUE(AllClose(got_state, want_state, 2e-5f, 1e-4f));
    for (size_t i = 0; i < positions.size(); ++i) {
      EXPECT_TRUE(AllClose(got_snap[i], want_snap[i], 2e-5f, 1e-4f)) << "at " << positions[i];
    }
  }
}

TEST_P(SsdTest, TwoCallsEqualOne) {
  const auto [tokens, chunk, groups, n] = GetParam();
  if (tokens < 2) GTEST_SKIP();
  SsdData d(tokens, 4, 6, groups, n, 11);
  CpuOps cpu(2);
  cpu.set_ssd_max_chunk(1 << 20);
  Workspace ws;
  auto one_state = d.state0, two_state = d.state0;
  std::vector<float> one(tokens * d.ld_x), two(tokens * d.ld_x);
  cpu.SsdScan(d.Args(one_state.data(), one.data(), chunk), ws);
  const int64_t split = tokens / 2 + 1;
  auto a = d.Args(two_state.data(), two.data(), chunk);
  a.tokens = split;
  ws.Reset();
  cpu.SsdScan(a, ws);
  a.tokens = tokens - split;
  a.x += split * d.ld_x;
  a.dt += split * d.ld_dt;
  a.b += split * d.ld_bc;
  a.c += split * d.ld_bc;
  a.y += split * d.ld_x;
  ws.Reset();
  if (a.tokens > 0) cpu.SsdScan(a, ws);
  EXPECT_TRUE(AllClose(two, one, 2e-5f, 1e-4f));
  EXPECT_TRUE(AllClose(two_state, one_state, 2e-5f, 1e-4f));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SsdTest,
                         ::testing::Combine(::testing::Values(1, 6, 7, 8, 40, 300),
                                            ::testing::Values(1, 7, 32, 256),
                                            ::testing::Values(1, 2), ::testing::Values(5, 16)));

TEST(SsdTest, ChunkSizeDoesNotChangeTheResult) {
  SsdData d(200, 4, 8, 2, 16, 21);
  CpuOps cpu(2);
  cpu.set_ssd_max_chunk(1 << 20);
  std::vector<float> base(200 * d.ld_x), other(200 * d.ld_x);
  auto base_state = d.state0;
  Workspace ws;
  cpu.SsdScan(d.Args(base_state.data(), base.data(), 1), ws);
  for (int32_t chunk : {3, 64, 256}) {
    auto state = d.state0;
    ws.Reset();
    cpu.SsdScan(d.Args(state.data(), other.data(), chunk), ws);
    EXPECT_TRUE(AllClose(other, base, 2e-5f, 1e-4f)) << chunk;
    EXPECT_TRUE(AllClose(state, base_state, 2e-5f, 1e-4f)) << chunk;
  }
}

TEST(SsdTest, DefaultMaxChunkMatchesReferenceWithSnapshots) {
  SsdData d(300, 6, 8, 2, 16, 33);
  std::vector<int64_t> positions = {0, 31, 32, 33, 100, 255, 256, 257, 300};
  std::vector<std::vector<float>> want_snap(positions.size(), std::vector<float>(d.state_len())),
      got_snap = want_snap;
  std::vector<StateSnapshot> wsn, gsn;
  for (size_t i = 0; i < positions.size(); ++i) {
    wsn.push_back({positions[i], want_snap[i].data()});
    gsn.push_back({positions[i], got_snap[i].data()});
  }
  auto want_state = d.state0, got_state = d.state0;
  std::vector<float> want(300 * d.ld_x), got(300 * d.ld_x);
  Workspace ws;
  auto a = d.Args(want_state.data(), want.data(), 256);
  a.snapshots = wsn;
  ReferenceOps().SsdScan(a, ws);
  a.state = got_state.data();
  a.y = got.data();
  a.snapshots = gsn;
  CpuOps(2).SsdScan(a, ws);
  EXPECT_TRUE(AllClose(got, want, 2e-5f, 1e-4f));
  EXPECT_TRUE(AllClose(got_state, want_state, 2e-5f, 1e-4f));
  for (size_t i = 0; i < positions.size(); ++i) {
    EXPECT_TRUE(AllClose(got_snap[i], want_snap[i], 2e-5f, 1e-4f)) << positions[i];
  }
}

TEST(SsdTest, StateUpdateMatchesReference) {
  for (int32_t groups : {1, 2}) {
    SsdData d(1, 8, 16, groups, 32, 17 + groups);
    auto want_state = d.state0, got_state = d.state0;
    std::vector<float> want(d.ld_x), got(d.ld_x), snap0(d.state_len()), snap1(d.state_len());
    StateSnapshot snaps[] = {{0, snap0.data()}, {1, snap1.data()}};
    auto a = d.Args(want_state.data(), want.data(), 256);
    ReferenceOps().SsdStateUpdate(a);
    a.state = got_state.data();
    a.y = got.data();
    a.snapshots = snaps;
    CpuOps(2).SsdStateUpdate(a);
    EXPECT_TRUE(AllClose(got, want, 1e-5f, 1e-5f));
    EXPECT_TRUE(AllClose(got_state, want_state, 1e-6f, 1e-5f));
    EXPECT_TRUE(AllClose(snap0, d.state0, 0, 0));
    EXPECT_TRUE(AllClose(snap1, got_state, 0, 0));
  }
}

TEST(SsdTest, GroupMappingIsContiguousHeadBlocks) {
  // With 2 groups and 4 heads, heads 0-1 read group 0's B/C and heads 2-3 group 1's: zeroing
  // group 1's B must leave heads 0-1 unchanged and change heads 2-3 (from a zero state).
  SsdData d(3, 4, 2, 2, 4, 5);
  std::vector<float> zero(d.state_len(), 0.0f);
  auto s1 = zero, s2 = zero;
  std::vector<float> y1(3 * d.ld_x), y2(3 * d.ld_x);
  ReferenceOps ref;
  Workspace ws;
  ref.SsdScan(d.Args(s1.data(), y1.data(), 256), ws);
  for (int64_t t = 0; t < 3; ++t) {
    for (int32_t k = 0; k < 4; ++k) d.b[t * d.ld_bc + 4 + k] = 0.0f;
  }
  ref.SsdScan(d.Args(s2.data(), y2.data(), 256), ws);
  const int64_t half = d.state_len() / 2;
  EXPECT_TRUE(AllClose(s2.data(), s1.data(), half, 0, 0));
  for (int64_t i = half; i < d.state_len(); ++i) EXPECT_EQ(s2[i], 0.0f);
}

TEST(ScanEdgeTest, ZeroTokensKeepStateAndSnapshotIt) {
  CpuOps cpu(2);
  Workspace ws;
  {
    ConvData d({0, 20, 4, true, true}, 1);
    auto state = d.state0;
    std::vector<float> snap(state.size(), -1.0f);
    StateSnapshot snaps[] = {{0, snap.data()}};
    auto a = d.Args(state.data(), nullptr);
    a.snapshots = snaps;
    cpu.CausalConv1d(a);
    EXPECT_TRUE(AllClose(state, d.state0, 0, 0));
    EXPECT_TRUE(AllClose(snap, d.state0, 0, 0));
  }
  {
    ScanData d(0, 20, 16, true, 2);
    auto state = d.state0;
    std::vector<float> snap(state.size(), -1.0f);
    StateSnapshot snaps[] = {{0, snap.data()}};
    auto a = d.Args(state.data(), nullptr);
    a.snapshots = snaps;
    cpu.SelectiveScan(a);
    EXPECT_TRUE(AllClose(state, d.state0, 0, 0));
    EXPECT_TRUE(AllClose(snap, d.state0, 0, 0));
  }
  {
    SsdData d(0, 4, 6, 2, 8, 3);
    auto state = d.state0;
    std::vector<float> snap(state.size(), -1.0f);
    StateSnapshot snaps[] = {{0, snap.data()}};
    auto a = d.Args(state.data(), nullptr, 256);
    a.snapshots = snaps;
    cpu.SsdScan(a, ws);
    EXPECT_TRUE(AllClose(state, d.state0, 0, 0));
    EXPECT_TRUE(AllClose(snap, d.state0, 0, 0));
  }
}

TEST(ScanEdgeTest, KernelWidthOneHasNoState) {
  ConvData d({5, 9, 1, true, true}, 4);
  std::vector<float> want(5 * d.ld_out), got(5 * d.ld_out);
  ReferenceOps().CausalConv1d(d.Args(nullptr, want.data()));
  CpuOps(2).CausalConv1d(d.Args(nullptr, got.data()));
  EXPECT_TRUE(AllCloseStrided(got, want, 5, 9, d.ld_out, 1e-6f, 1e-5f));
}

// ---- Batch-invariant mode ------------------------------------------------------------------

// The decode step and the batch-invariant scan run the same recurrence: a prefill split at any
// position, or run token by token through SsdStateUpdate, gives the same bits as one call, and
// snapshots are the states the stepwise run passes through. It agrees with the reference too.
TEST(SsdTest, BatchInvariantScanIsBitIdenticalHoweverTheTokensAreSplit) {
  for (const int32_t groups : {1, 2}) {
    SsdData d(45, 4, 8, groups, 16, 17);
    CpuOps cpu(2);
    cpu.set_batch_invariant(true);
    Workspace ws;
    auto one_state = d.state0;
    std::vector<float> one(d.tokens * d.ld_x, 0.0f);
    std::vector<float> snap(d.state_len());
    const StateSnapshot snaps[] = {{29, snap.data()}};
    auto args = d.Args(one_state.data(), one.data(), 256);
    args.snapshots = snaps;
    cpu.SsdScan(args, ws);

    auto step_state = d.state0;
    std::vector<float> steps(d.tokens * d.ld_x, 0.0f);
    for (int64_t t = 0; t < d.tokens; ++t) {
      auto a = d.Args(step_state.data(), steps.data() + t * d.ld_x, 256);
      a.tokens = 1;
      a.x += t * d.ld_x;
      a.dt += t * d.ld_dt;
      a.b += t * d.ld_bc;
      a.c += t * d.ld_bc;
      cpu.SsdStateUpdate(a);
      if (t + 1 == 29) {
        EXPECT_EQ(step_state, snap) << "snapshot after 29 tokens";
      }
    }
    EXPECT_EQ(steps, one);
    EXPECT_EQ(step_state, one_state);

    for (const int64_t split : {int64_t{1}, int64_t{13}, int64_t{32}, int64_t{44}}) {
      auto state = d.state0;
      std::vector<float> two(d.tokens * d.ld_x, 0.0f);
      auto a = d.Args(state.data(), two.data(), 256);
      a.tokens = split;
      cpu.SsdScan(a, ws);
      a.tokens = d.tokens - split;
      a.x += split * d.ld_x;
      a.dt += split * d.ld_dt;
      a.b += split * d.ld_bc;
      a.c += split * d.ld_bc;
      a.y += split * d.ld_x;
      cpu.SsdScan(a, ws);
      EXPECT_EQ(two, one) << "split at " << split;
      EXPECT_EQ(state, one_state) << "split at " << split;
    }

    auto ref_state = d.state0;
    std::vector<float> ref_y(d.tokens * d.ld_x, 0.0f);
    ReferenceOps().SsdScan(d.Args(ref_state.data(), ref_y.data(), 256), ws);
    EXPECT_TRUE(AllClose(one, ref_y, 2e-5f, 1e-4f));
    EXPECT_TRUE(AllClose(one_state, ref_state, 2e-5f, 1e-4f));
  }
}

// The conv's decode step is the prefill over one token: the same bits either way.
TEST(ConvBatchInvarianceTest, StepIsBitIdenticalToPrefill) {
  for (const int32_t kernel : {2, 4}) {
    ConvData d({37, 300, kernel, true, true}, 8);
    CpuOps cpu(2);
    auto state_prefill = d.state0, state_step = d.state0;
    std::vector<float> out_prefill(37 * d.ld_out, 0.0f), out_step(37 * d.ld_out, 0.0f);
    cpu.CausalConv1d(d.Args(state_prefill.data(), out_prefill.data()));
    for (int64_t t = 0; t < 37; ++t) {
      auto a = d.Args(state_step.data(), out_step.data() + t * d.ld_out);
      a.tokens = 1;
      a.u += t * d.ld_u;
      cpu.CausalConv1dStep(a);
    }
    EXPECT_EQ(out_step, out_prefill) << "kernel " << kernel;
    EXPECT_EQ(state_step, state_prefill) << "kernel " << kernel;
  }
}

}  // namespace
}  // namespace tandem::kernels
