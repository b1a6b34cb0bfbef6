// On the GPU, a prefill of T tokens through a recurrent op (causal conv1d, the Mamba-1 selective
// scan, the Mamba-2 SSD scan) gives the bits of T decode steps: one-token calls from the same
// state. The kernels take a prefill in tiles of tokens (sequence_kernels.h), so this is what
// keeps a token's result independent of the tile it fell in, and the recurrent layers of a
// prefix-cache hit (resumed from a snapshot, its tiles starting elsewhere) equal to a cold
// prefill's. Outputs, the final state and a snapshot taken inside a tile are compared with the
// steps' bit for bit. The scans' prefills run with each count of rows per warp (one row's
// arithmetic does not depend on it). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/sequence_kernels.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::AllClose;
using kernels::testing::Rng;
using testing::ToDevice;
using testing::ToHost;

constexpr int64_t kTokens = 37;         // four whole tiles of 8 and a partial one
constexpr int64_t kSnapshotAfter = 20;  // inside the third tile

// Runs `launch` over kTokens tokens of `a` (with a snapshot after kSnapshotAfter), then kTokens
// times over one token (at_token(a, t): `a` with its inputs and output moved to token t), each
// from `state0` and writing `out_floats` floats through the field `out`; expects the same bits.
template <typename Args, typename Launch, typename AtToken>
void ExpectPrefillEqualsSteps(Args a, const std::vector<float>& state0, int64_t out_floats,
                              float* Args::*out, Launch launch, AtToken at_token) {
  auto whole_state = ToDevice(state0), step_state = ToDevice(state0);
  auto snapshot = ToDevice(std::vector<float>(state0.size(), -7.0f));
  auto whole_out = ToDevice(std::vector<float>(out_floats, 0.0f));
  auto step_out = ToDevice(std::vector<float>(out_floats, 0.0f));
  const StateSnapshot snapshots[] = {{kSnapshotAfter, snapshot.get()}};

  Args whole = a;
  whole.tokens = kTokens;
  whole.state = whole_state.get();
  whole.*out = whole_out.get();
  whole.snapshots = snapshots;
  ASSERT_CUDA_OK(launch(whole));

  Args steps = a;
  steps.state = step_state.get();
  steps.*out = step_out.get();
  std::vector<float> after_steps;
  for (int64_t t = 0; t < kTokens; ++t) {
    Args one = at_token(steps, t);
    one.tokens = 1;
    ASSERT_CUDA_OK(launch(one));
    if (t + 1 == kSnapshotAfter) after_steps = ToHost(step_state);
  }
  EXPECT_TRUE(AllClose(ToHost(whole_out), ToHost(step_out), 0.0f, 0.0f)) << "outputs";
  EXPECT_TRUE(AllClose(ToHost(whole_state), ToHost(step_state), 0.0f, 0.0f)) << "final state";
  EXPECT_TRUE(AllClose(ToHost(snapshot), after_steps, 0.0f, 0.0f))
      << "snapshot after " << kSnapshotAfter << " tokens";
}

TEST(CudaPrefillEqualsDecodeStepsTest, CausalConv) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(21);
  for (int32_t width : {2, 4, 8}) {
    SCOPED_TRACE(::testing::Message() << "width " << width);
    const int32_t channels = 300;
    const int64_t ld = channels + 3;
    auto u = ToDevice(rng.Uniform(kTokens * ld)), w = ToDevice(rng.Uniform(channels * width)),
         bias = ToDevice(rng.Uniform(channels));
    CausalConvArgs a;
    a.channels = channels;
    a.kernel = width;
    a.silu = true;
    a.u = u.get();
    a.ld_u = a.ld_out = ld;
    a.weight = w.get();
    a.bias = bias.get();
    ExpectPrefillEqualsSteps(
        a, rng.Uniform(int64_t{width - 1} * channels), kTokens * ld, &CausalConvArgs::out,
        [](const CausalConvArgs& args) { return CausalConv1d(nullptr, args); },
        [](CausalConvArgs one, int64_t t) {
          one.u += t * one.ld_u;
          one.out += t * one.ld_out;
          return one;
        });
  }
}

TEST(CudaPrefillEqualsDecodeStepsTest, SelectiveScan) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(22);
  // One state per lane, two, four, and eight (whose tiles are half as long).
  for (int32_t n_state : {16, 40, 128, 256}) {
    SCOPED_TRACE(::testing::Message() << "N " << n_state);
    const int32_t inner = 6;
    const int64_t ld = inner + 2, state_floats = int64_t{inner} * n_state;
    auto u = ToDevice(rng.Uniform(kTokens * ld)),
         delta = ToDevice(rng.Uniform(kTokens * ld, -3, 1)),
         delta_bias = ToDevice(rng.Uniform(inner, -1, 0)),
         a_mat = ToDevice(rng.Uniform(state_floats, -2, -0.1f)),
         b = ToDevice(rng.Uniform(kTokens * n_state)), c = ToDevice(rng.Uniform(kTokens * n_state)),
         d = ToDevice(rng.Uniform(inner)), z = ToDevice(rng.Uniform(kTokens * ld));
    SelectiveScanArgs a;
    a.inner = inner;
    a.state_size = n_state;
    a.ld_u = a.ld_delta = a.ld_z = a.ld_y = ld;
    a.ld_b = a.ld_c = n_state;
    a.u = u.get();
    a.delta = delta.get();
    a.delta_bias = delta_bias.get();
    a.a = a_mat.get();
    a.b = b.get();
    a.c = c.get();
    a.d = d.get();
    a.z = z.get();
    const std::vector<float> state0 = rng.Uniform(state_floats);
    for (int rows_per_warp : {1, 2, 4}) {  // 4: a warp of 4 channels and one of 2 live ones
      SCOPED_TRACE(::testing::Message() << rows_per_warp << " rows per warp");
      ExpectPrefillEqualsSteps(
          a, state0, kTokens * ld, &SelectiveScanArgs::y,
          [&](const SelectiveScanArgs& args) {
            return SelectiveScanWithRowsPerWarp(nullptr, args, rows_per_warp);
          },
          [](SelectiveScanArgs one, int64_t t) {
            one.u += t * one.ld_u;
            one.delta += t * one.ld_delta;
            one.b += t * one.ld_b;
            one.c += t * one.ld_c;
            one.z += t * one.ld_z;
            one.y += t * one.ld_y;
            return one;
          });
    }
  }
}

TEST(CudaPrefillEqualsDecodeStepsTest, SsdScan) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  Rng rng(23);
  for (int32_t n_state : {16, 64, 128, 200}) {
    SCOPED_TRACE(::testing::Message() << "N " << n_state);
    const int32_t heads = 4, head_dim = 8, groups = 2;
    const int64_t width = int64_t{heads} * head_dim, bc = int64_t{groups} * n_state;
    auto x = ToDevice(rng.Uniform(kTokens * width)),
         dt = ToDevice(rng.Uniform(kTokens * heads, -3, 1)),
         dt_bias = ToDevice(rng.Uniform(heads, -1, 0)),
         a_vec = ToDevice(rng.Uniform(heads, -2, -0.1f)), b = ToDevice(rng.Uniform(kTokens * bc)),
         c = ToDevice(rng.Uniform(kTokens * bc)), d = ToDevice(rng.Uniform(heads));
    SsdScanArgs a;
    a.heads = heads;
    a.head_dim = head_dim;
    a.groups = groups;
    a.state_size = n_state;
    a.ld_x = a.ld_y = width;
    a.ld_dt = heads;
    a.ld_b = a.ld_c = bc;
    a.dt_min = 0.001f;
    a.dt_max = 0.1f;
    a.x = x.get();
    a.dt = dt.get();
    a.dt_bias = dt_bias.get();
    a.a = a_vec.get();
    a.b = b.get();
    a.c = c.get();
    a.d = d.get();
    const std::vector<float> state0 = rng.Uniform(width * n_state);
    for (int rows_per_warp : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << rows_per_warp << " rows per warp");
      ExpectPrefillEqualsSteps(
          a, state0, kTokens * width, &SsdScanArgs::y,
          [&](const SsdScanArgs& args) {
            return SsdScanWithRowsPerWarp(nullptr, args, rows_per_warp);
          },
          [](SsdScanArgs one, int64_t t) {
            one.x += t * one.ld_x;
            one.dt += t * one.ld_dt;
            one.b += t * one.ld_b;
            one.c += t * one.ld_c;
            one.y += t * one.ld_y;
            return one;
          });
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::cuda
