// CpuOps vs ReferenceOps for the dense ops, plus hand-computed values for the reference itself.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/moe_routing.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/scalar_math.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::AllCloseStrided;
using testing::Rng;

TEST(ScalarMathTest, SoftplusIsLinearAboveTwenty) {
  EXPECT_EQ(Softplus(25.0f), 25.0f);
  EXPECT_FLOAT_EQ(Softplus(0.0f), std::log(2.0f));
  EXPECT_NEAR(Softplus(-30.0f), std::exp(-30.0f), 1e-18);
}

TEST(ScalarMathTest, ActivationsMatchClosedForms) {
  EXPECT_FLOAT_EQ(Silu(1.0f), 1.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_NEAR(Gelu(1.0f), 0.8413447460685429f, 1e-6);  // x·Φ(x), exact erf form
  EXPECT_NEAR(Gelu(-2.0f), -0.0455002638963584f, 1e-6);
}

TEST(ScalarMathTest, SsdDtClamps) {
  EXPECT_FLOAT_EQ(SsdDt(-30.0f, 0.0f, 1e-3f, 0.0f), 1e-3f);
  EXPECT_FLOAT_EQ(SsdDt(5.0f, 0.0f, 0.0f, 0.1f), 0.1f);
  EXPECT_FLOAT_EQ(SsdDt(5.0f, 0.0f, 0.0f, INFINITY), Softplus(5.0f));
  EXPECT_FLOAT_EQ(SsdDt(5.0f, 0.0f, 0.0f, 0.0f), Softplus(5.0f));
}

TEST(ReferenceOpsTest, LinearKnownValues) {
  ReferenceOps ref;
  const float x[] = {1, 2, 3, 4, 5, 6};         // [2, 3]
  const float w[] = {1, 0, -1, 0.5, 0.5, 0.5};  // [2, 3]
  const float b[] = {10, 20};
  float y[4];
  ref.Linear(x, 3, 2, WeightMatrix::F32(w, 2, 3), b, y, 2);
  EXPECT_FLOAT_EQ(y[0], 8.0f);
  EXPECT_FLOAT_EQ(y[1], 23.0f);
  EXPECT_FLOAT_EQ(y[2], 8.0f);
  EXPECT_FLOAT_EQ(y[3], 27.5f);
}

TEST(ReferenceOpsTest, RopeRotatesHalves) {
  ReferenceOps ref;
  // head_dim 4: pairs (0,2) at inv_freq 1 and (1,3) at inv_freq 1/theta^(1/2) = 0.01.
  float x[] = {1, 1, 0, 0};
  ref.Rope(x, 4, 1, 1, 4, /*start_pos=*/3, 10000.0f);
  EXPECT_NEAR(x[0], std::cos(3.0f), 1e-6);
  EXPECT_NEAR(x[2], std::sin(3.0f), 1e-6);
  EXPECT_NEAR(x[1], std::cos(0.03f), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.03f), 1e-6);
}

MoeRouting Softmax(bool renormalize) {
  MoeRouting r;
  r.renormalize = renormalize;
  return r;
}

TEST(MoeRoutingTest, SoftmaxTopKWithAndWithoutRenormalisation) {
  float logits[] = {0.0f, 2.0f, 1.0f, 2.0f};
  int32_t e[2];
  float w[2];
  RouteToken(logits, 4, 2, Softmax(false), e, w);
  EXPECT_EQ(e[0], 1);  // tie with expert 3: lower index first
  EXPECT_EQ(e[1], 3);
  const float z = 1 + 2 * std::exp(2.0f) + std::exp(1.0f);
  EXPECT_NEAR(w[0], std::exp(2.0f) / z, 1e-6);
  RouteToken(logits, 4, 2, Softmax(true), e, w);
  EXPECT_NEAR(w[0], 0.5f, 1e-6);
  EXPECT_NEAR(w[1], 0.5f, 1e-6);
}

TEST(MoeRoutingTest, SoftmaxHandlesManyExperts) {
  std::vector<float> logits(100, 0.0f);
  logits[70] = 3.0f;
  logits[99] = 2.0f;
  logits[3] = 2.0f;
  int32_t e[3];
  float w[3];
  RouteToken(logits.data(), 100, 3, Softmax(true), e, w);
  EXPECT_EQ(e[0], 70);
  EXPECT_EQ(e[1], 3);
  EXPECT_EQ(e[2], 99);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0f, 1e-6);
  EXPECT_NEAR(w[1], w[2], 1e-7);
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Nemotron 3's router, worked by hand: 8 experts in 4 groups of 2, the best 2 groups allowed.
TEST(MoeRoutingTest, SigmoidChoosesByBiasedScoreWithinTheBestGroups) {
  //                 group 0      group 1      group 2      group 3
  float logits[] = {3.0f, -3.0f, 0.5f, 0.4f, 0.2f, 0.1f, 2.5f, -4.0f};
  float bias[] = {0.0f, 0.0f, 0.0f, 0.0f, 0.9f, 0.9f, 0.0f, 0.0f};
  MoeRouting r;
  r.score = MoeRouting::Score::kSigmoid;
  r.bias = bias;
  r.groups = 4;
  r.top_groups = 2;
  // Group scores (two best biased scores summed): g0 σ(3)+σ(-3) = 1, g1 ≈ 1.22,
  // g2 ≈ 2.90 (the bias lifts it), g3 ≈ 0.94. Allowed: g2 and g1.
  int32_t e[3];
  float w[3];
  RouteToken(logits, 8, 3, r, e, w);
  EXPECT_EQ(e[0], 4);  // σ(0.2)+0.9: expert 0 (σ(3)) ranks higher but its group is not allowed
  EXPECT_EQ(e[1], 5);
  EXPECT_EQ(e[2], 2);
  // The weights are the unbiased sigmoids.
  EXPECT_FLOAT_EQ(w[0], Sigmoid(0.2f));
  EXPECT_FLOAT_EQ(w[2], Sigmoid(0.5f));

  r.renormalize = true;
  r.scale = 2.5f;
  RouteToken(logits, 8, 3, r, e, w);
  const float sum = Sigmoid(0.2f) + Sigmoid(0.1f) + Sigmoid(0.5f);
  EXPECT_NEAR(w[0], 2.5f * Sigmoid(0.2f) / sum, 1e-6);
  EXPECT_NEAR(w[0] + w[1] + w[2], 2.5f, 1e-5);

  // One group, no bias: the plain top-k of the sigmoids.
  r.bias = nullptr;
  r.groups = 1;
  r.top_groups = 1;
  RouteToken(logits, 8, 2, r, e, w);
  EXPECT_EQ(e[0], 0);
  EXPECT_EQ(e[1], 6);
}

TEST(MoeRoutingTest, FitsOnlyWholeGroupsWithRoomForK) {
  MoeRouting r;
  EXPECT_TRUE(RoutingFits(r, 8, 8));
  EXPECT_FALSE(RoutingFits(r, 8, 9));
  r.top_groups = 2;
  EXPECT_FALSE(RoutingFits(r, 8, 2));  // two of one group
  r.groups = 4;
  r.top_groups = 2;
  EXPECT_TRUE(RoutingFits(r, 8, 4));
  EXPECT_FALSE(RoutingFits(r, 8, 5));  // two groups of two hold four
  EXPECT_FALSE(RoutingFits(r, 10, 2));  // 4 does not divide 10
  r.groups = 8;
  r.top_groups = 1;
  EXPECT_FALSE(RoutingFits(r, 8, 1));  // groups of one: no two best
  r.groups = 128;
  EXPECT_FALSE(RoutingFits(r, 256, 1));  // more groups than a mask holds
}

class LinearTest : public ::testing::TestWithParam<std::tuple<int, int, int, GemmImpl>> {};

TEST_P(LinearTest, MatchesReference) {
  const auto [m, k, n, impl] = GetParam();
  Rng rng(m * 1000 + k * 10 + n);
  const int64_t ld_x = k + 3, ld_y = n + 5;
  auto x = rng.Uniform(m * ld_x), w = rng.Uniform(int64_t{n} * k), b = rng.Uniform(n);
  ReferenceOps ref;
  CpuOps cpu(3);
  cpu.set_gemm_impl(impl);
  for (const float* bias :
       {static_cast<const float*>(nullptr), static_cast<const float*>(b.data())}) {
    std::vector<float> want(m * ld_y, 7.0f), got(m * ld_y, 7.0f);
    ref.Linear(x.data(), ld_x, m, WeightMatrix::F32(w.data(), n, k), bias, want.data(), ld_y);
    cpu.Linear(x.data(), ld_x, m, WeightMatrix::F32(w.data(), n, k), bias, got.data(), ld_y);
    EXPECT_TRUE(AllClose(got, want, 1e-5f * k, 1e-5f));  // padding (7.0) must be untouched too
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 5, 17, 64), ::testing::Values(1, 7, 33, 200),
                       ::testing::Values(1, 5, 50, 130),
                       ::testing::Values(GemmImpl::kAuto, GemmImpl::kBlas, GemmImpl::kOwn)));

TEST(CpuOpsTest, LinearLargeMatchesReference) {
  Rng rng(7);
  const int m = 70, k = 300, n = 777;
  auto x = rng.Uniform(m * k), w = rng.Uniform(n * k), b = rng.Uniform(n);
  ReferenceOps ref;
  CpuOps cpu(2);
  for (GemmImpl impl : {GemmImpl::kBlas, GemmImpl::kOwn}) {
    cpu.set_gemm_impl(impl);
    std::vector<float> want(m * n), got(m * n);
    ref.Linear(x.data(), k, m, WeightMatrix::F32(w.data(), n, k), b.data(), want.data(), n);
    cpu.Linear(x.data(), k, m, WeightMatrix::F32(w.data(), n, k), b.data(), got.data(), n);
    EXPECT_TRUE(AllClose(got, want, 1e-4f, 1e-5f));
  }
}

TEST(CpuOpsTest, RmsNormMatchesReference) {
  Rng rng(1);
  for (int rows : {1, 3, 70}) {
    for (int dim : {1, 17, 768}) {
      const int ld = dim + 2;
      auto x = rng.Uniform(rows * ld, -3, 3), w = rng.Uniform(dim);
      std::vector<float> want(rows * ld, 0.0f), got(rows * ld, 0.0f);
      ReferenceOps().RmsNorm(x.data(), ld, rows, dim, w.data(), 1e-6f, want.data(), ld);
      CpuOps(2).RmsNorm(x.data(), ld, rows, dim, w.data(), 1e-6f, got.data(), ld);
      EXPECT_TRUE(AllClose(got, want, 1e-6f, 1e-5f)) << rows << "x" << dim;
    }
  }
}

TEST(CpuOpsTest, GatedRmsNormMatchesReferenceForOneAndTwoGroups) {
  Rng rng(2);
  for (int groups : {1, 2, 4}) {
    const int rows = 9, dim = 40, ld = 45;
    auto y = rng.Uniform(rows * ld, -2, 2), z = rng.Uniform(rows * ld, -4, 4), w = rng.Uniform(dim);
    std::vector<float> want(rows * ld), got(rows * ld);
    ReferenceOps().GatedRmsNorm(y.data(), ld, z.data(), ld, rows, dim, groups, w.data(), 1e-5f,
                                want.data(), ld);
    CpuOps(2).GatedRmsNorm(y.data(), ld, z.data(), ld, rows, dim, groups, w.data(), 1e-5f,
                           got.data(), ld);
    EXPECT_TRUE(AllCloseStrided(got, want, rows, dim, ld, 1e-6f, 1e-5f)) << groups;
  }
  // Groups really are normalised separately: 1 group and 2 groups differ.
  auto y = rng.Uniform(8), z = rng.Uniform(8);
  y[0] = 10.0f;
  std::vector<float> w(8, 1.0f), one(8), two(8);
  ReferenceOps().GatedRmsNorm(y.data(), 8, z.data(), 8, 1, 8, 1, w.data(), 1e-5f, one.data(), 8);
  ReferenceOps().GatedRmsNorm(y.data(), 8, z.data(), 8, 1, 8, 2, w.data(), 1e-5f, two.data(), 8);
  EXPECT_FALSE(AllClose(one, two, 1e-3f, 1e-3f));
}

TEST(CpuOpsTest, RopeMatchesReference) {
  Rng rng(3);
  for (int head_dim : {4, 64, 96}) {
    for (int64_t start : {0, 1, 4000}) {
      const int tokens = 5, heads = 3, ld = heads * head_dim + 4;
      auto x = rng.Uniform(tokens * ld);
      auto want = x, got = x;
      ReferenceOps().Rope(want.data(), ld, tokens, heads, head_dim, start, 10000.0f);
      CpuOps(2).Rope(got.data(), ld, tokens, heads, head_dim, start, 10000.0f);
      EXPECT_TRUE(AllClose(got, want, 1e-6f, 1e-6f));
    }
  }
}

TEST(CpuOpsTest, GatedActivationMatchesReference) {
  Rng rng(4);
  for (Activation act : {Activation::kSilu, Activation::kGelu}) {
    const int rows = 33, cols = 101, ld = 2 * cols + 1;
    auto in = rng.Uniform(rows * ld, -6, 6);
    std::vector<float> want(rows * cols), got(rows * cols);
    ReferenceOps().GatedActivation(act, in.data(), ld, in.data() + cols, ld, rows, cols,
                                   want.data(), cols);
    CpuOps(2).GatedActivation(act, in.data(), ld, in.data() + cols, ld, rows, cols, got.data(),
                              cols);
    EXPECT_TRUE(AllClose(got, want, 1e-6f, 1e-6f));
  }
}

TEST(CpuOpsTest, GatedMlpMatchesReference) {
  Rng rng(5);
  for (int rows : {1, 6, 40}) {
    const int H = 24, I = 37, ld_x = 30, ld_out = 26;
    auto x = rng.Uniform(rows * ld_x), gu = rng.Uniform(2 * I * H), down = rng.Uniform(H * I);
    std::vector<float> want(rows * ld_out), got(rows * ld_out);
    Workspace ws;
    const WeightMatrix gate_up_w = WeightMatrix::F32(gu.data(), 2 * I, H);
    const WeightMatrix down_w = WeightMatrix::F32(down.data(), H, I);
    ReferenceOps().GatedMlp(Activation::kGelu, x.data(), ld_x, rows, gate_up_w, down_w,
                            want.data(), ld_out, ws);
    ws.Reset();
    CpuOps(2).GatedMlp(Activation::kGelu, x.data(), ld_x, rows, gate_up_w, down_w, got.data(),
                       ld_out, ws);
    EXPECT_TRUE(AllCloseStrided(got, want, rows, H, ld_out, 1e-5f, 1e-5f));
  }
}

TEST(CpuOpsTest, MoeMatchesReference) {
  Rng rng(6);
  const int H = 20, I = 13, E = 5;
  std::vector<std::vector<float>> gu(E), down(E);
  std::vector<WeightMatrix> gu_ptr(E), down_ptr(E);
  for (int e = 0; e < E; ++e) {
    gu[e] = rng.Uniform(2 * I * H);
    down[e] = rng.Uniform(H * I);
    gu_ptr[e] = WeightMatrix::F32(gu[e].data(), 2 * I, H);
    down_ptr[e] = WeightMatrix::F32(down[e].data(), H, I);
  }
  auto router = rng.Uniform(E * H, -2, 2);
  for (int tokens : {1, 2, 9, 64}) {
    for (int top_k : {1, 2, 5}) {
      for (bool renorm : {false, true}) {
        auto x = rng.Uniform(tokens * (H + 1));
        MoeArgs args;
        args.tokens = tokens;
        args.hidden = H;
        args.intermediate = I;
        args.num_experts = E;
        args.top_k = top_k;
        args.routing.renormalize = renorm;
        args.x = x.data();
        args.ld_x = H + 1;
        args.router = WeightMatrix::F32(router.data(), E, H);
        args.gate_up = gu_ptr.data();
        args.down = down_ptr.data();
        args.ld_out = H + 2;
        std::vector<float> want(tokens * (H + 2), 3.0f), got(tokens * (H + 2), 3.0f);
        Workspace ws;
        args.out = want.data();
        ReferenceOps().Moe(args, ws);
        ws.Reset();
        args.out = got.data();
        CpuOps(2).Moe(args, ws);
        EXPECT_TRUE(AllClose(got, want, 1e-5f, 1e-5f))
            << tokens << " tokens, k=" << top_k << " renorm=" << renorm;
      }
    }
  }
}

// Nemotron 3's layer: plain (ungated) experts on a latent input narrower than the router's,
// sigmoid routing with a correction bias, groups and a scale.
TEST(CpuOpsTest, UngatedSigmoidRoutedMoeOnASeparateRouterInputMatchesReference) {
  Rng rng(13);
  const int H = 24, L = 10, I = 7, E = 8;
  std::vector<std::vector<float>> up(E), down(E);
  std::vector<WeightMatrix> up_ptr(E), down_ptr(E);
  for (int e = 0; e < E; ++e) {
    up[e] = rng.Uniform(I * L);
    down[e] = rng.Uniform(L * I);
    up_ptr[e] = WeightMatrix::F32(up[e].data(), I, L);
    down_ptr[e] = WeightMatrix::F32(down[e].data(), L, I);
  }
  const auto router = rng.Uniform(E * H, -1, 1);
  const auto bias = rng.Uniform(E, -0.3f, 0.3f);
  for (int tokens : {1, 5, 40}) {
    for (int groups : {1, 4}) {
      auto hidden = rng.Uniform(tokens * H);
      auto latent = rng.Uniform(tokens * (L + 3));
      MoeArgs args;
      args.tokens = tokens;
      args.hidden = L;
      args.intermediate = I;
      args.num_experts = E;
      args.top_k = 3;
      args.routing.score = MoeRouting::Score::kSigmoid;
      args.routing.renormalize = true;
      args.routing.bias = bias.data();
      args.routing.groups = groups;
      args.routing.top_groups = groups == 1 ? 1 : 2;
      args.routing.scale = 2.5f;
      args.gated = false;
      args.act = Activation::kReluSquared;
      args.x = latent.data();
      args.ld_x = L + 3;
      args.route_x = hidden.data();
      args.ld_route_x = H;
      args.router = WeightMatrix::F32(router.data(), E, H);
      args.gate_up = up_ptr.data();
      args.down = down_ptr.data();
      args.ld_out = L;
      std::vector<float> want(tokens * L), got(tokens * L);
      Workspace ws;
      args.out = want.data();
      ReferenceOps().Moe(args, ws);
      ws.Reset();
      args.out = got.data();
      CpuOps(2).Moe(args, ws);
      EXPECT_TRUE(AllClose(got, want, 1e-5f, 1e-5f)) << tokens << " tokens, " << groups
                                                      << " groups";
    }
  }
}

}  // namespace
}  // namespace tandem::kernels

namespace tandem::kernels {
namespace {

// The row movers that keep activations out of the layer graphs: gathers in every weight format,
// strided copies and adds, on the CPU backend's thread split against the reference.
TEST(CpuOpsTest, RowGatherCopyAndAddMatchReference) {
  testing::Rng rng(21);
  const int64_t rows = 70, cols = 257, ld_src = 260, ld_dst = 270;
  const std::vector<float> values = rng.Uniform(40 * cols);
  for (WeightFormat format :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16, WeightFormat::kI8}) {
    std::vector<uint8_t> bytes(40 * cols * WeightElementBytes(format));
    std::vector<float> scales(40);
    ConvertWeights(values.data(), 40, cols, format, bytes.data(), scales.data());
    const WeightMatrix table{format, bytes.data(), scales.data(), 40, cols};
    std::vector<int32_t> ids(rows);
    for (int64_t i = 0; i < rows; ++i) ids[i] = static_cast<int32_t>((i * 7) % 40);
    std::vector<float> want(rows * ld_dst, -1.0f), got(rows * ld_dst, -1.0f);
    ReferenceOps().GatherRows(table, ids, want.data(), ld_dst);
    CpuOps(2).GatherRows(table, ids, got.data(), ld_dst);
    ASSERT_EQ(got, want) << WeightFormatName(format);
    EXPECT_EQ(got[1 * ld_dst + 3], table.At(7, 3));
  }
  const std::vector<float> src = rng.Uniform(rows * ld_src), dst = rng.Uniform(rows * ld_dst);
  std::vector<float> want = dst, got = dst;
  ReferenceOps().CopyRows(src.data(), ld_src, rows, cols, want.data(), ld_dst);
  CpuOps(2).CopyRows(src.data(), ld_src, rows, cols, got.data(), ld_dst);
  ASSERT_EQ(got, want);
  EXPECT_EQ(got[cols], dst[cols]);  // past `cols` untouched
  want = dst;
  got = dst;
  ReferenceOps().AddRows(src.data(), ld_src, rows, cols, want.data(), ld_dst);
  CpuOps(2).AddRows(src.data(), ld_src, rows, cols, got.data(), ld_dst);
  ASSERT_EQ(got, want);
  EXPECT_EQ(got[5], dst[5] + src[5]);
  for (Activation act : {Activation::kSilu, Activation::kGelu, Activation::kReluSquared}) {
    want = dst;
    got = dst;
    for (float& v : want) v -= 0.5f;  // both signs, for relu²
    got = want;
    ReferenceOps().Activate(act, want.data(), ld_dst, rows, cols);
    CpuOps(2).Activate(act, got.data(), ld_dst, rows, cols);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << static_cast<int>(act);
    }
  }
  EXPECT_EQ(ReluSquared(-0.5f), 0.0f);
  EXPECT_TRUE(std::isnan(ReluSquared(std::nanf(""))));  // as torch: relu keeps NaN
  EXPECT_EQ(ReluSquared(3.0f), 9.0f);
  want = dst;
  got = dst;
  ReferenceOps().ScaleRows(want.data(), ld_dst, rows, cols, 0.22f);
  CpuOps(2).ScaleRows(got.data(), ld_dst, rows, cols, 0.22f);
  ASSERT_EQ(got, want);
  EXPECT_EQ(got[ld_dst + 5], dst[ld_dst + 5] * 0.22f);
  want = dst;
  got = dst;
  ReferenceOps().DivideRows(want.data(), ld_dst, rows, cols, 6.0f);
  CpuOps(2).DivideRows(got.data(), ld_dst, rows, cols, 6.0f);
  ASSERT_EQ(got, want);
  EXPECT_EQ(got[ld_dst + 5], dst[ld_dst + 5] / 6.0f);
  EXPECT_EQ(got[cols], dst[cols]);  // past `cols` untouched
}

}  // namespace
}  // namespace tandem::kernels
