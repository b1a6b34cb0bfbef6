// CudaOps (kernels/cuda/cuda_ops.h): the ops it composes from the kernels (gated MLP, MoE with
// host routing, attention as a causal range, the shared-prefix part) and the host-side lists it
// uploads, against the reference backend; and that a refused call is reported, skips the calls
// after it, and clears. Skips without a CUDA device.
#include "kernels/cuda/cuda_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/reference/reference_ops.h"
#include "kernels/weight_matrix.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::AllClose;
using kernels::testing::Rng;
using testing::DeviceWeights;
using testing::MakeDeviceWeights;
using testing::NewOps;
using testing::ToDevice;
using testing::ToHost;

std::unique_ptr<DeviceWeights> Make(WeightFormat format, int64_t rows, int64_t cols,
                                    uint32_t seed) {
  return MakeDeviceWeights(format, rows, cols, seed, -0.5f, 0.5f);
}

class CudaOpsFormatTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(CudaOpsFormatTest, GatedMlpAndMoeMatchReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  Workspace ws(1 << 20, &ops->activation_memory()), host_ws;
  Rng rng(1);
  const int64_t H = 48, I = 40, T = 13, ld_x = H + 2, ld_out = H + 3;
  const int32_t E = 4, K = 2;
  // MoE also runs 40 tokens: experts then get 16 rows or more, which take the tiled kernels.
  const int64_t kMaxTokens = 40;
  const std::vector<float> x = rng.Uniform(kMaxTokens * ld_x);
  auto dx = ToDevice(x);

  const auto gate_up = Make(GetParam(), 2 * I, H, 2), down = Make(GetParam(), H, I, 3);
  std::vector<float> want(T * ld_out, 0.0f);
  ReferenceOps().GatedMlp(Activation::kSilu, x.data(), ld_x, T, gate_up->host, down->host,
                          want.data(), ld_out, host_ws);
  auto dout = ToDevice(std::vector<float>(T * ld_out, 0.0f));
  ops->GatedMlp(Activation::kSilu, dx.get(), ld_x, T, gate_up->device, down->device, dout.get(),
                ld_out, ws);
  ASSERT_EQ(ops->Synchronize(), "");
  ASSERT_TRUE(AllClose(ToHost(dout), want, 1e-4f, 1e-4f)) << "GatedMlp";

  std::vector<std::unique_ptr<DeviceWeights>> experts_gu, experts_down;
  std::vector<WeightMatrix> host_gu, host_down, device_gu, device_down;
  for (int32_t e = 0; e < E; ++e) {
    experts_gu.push_back(Make(GetParam(), 2 * I, H, 10 + e));
    experts_down.push_back(Make(GetParam(), H, I, 20 + e));
    host_gu.push_back(experts_gu.back()->host);
    host_down.push_back(experts_down.back()->host);
    device_gu.push_back(experts_gu.back()->device);
    device_down.push_back(experts_down.back()->device);
  }
  const auto router = Make(WeightFormat::kF32, E, H, 30);
  const auto run_moe = [&](int64_t tokens, bool renormalize) {
    MoeArgs a;
    a.tokens = tokens;
    a.hidden = H;
    a.intermediate = I;
    a.num_experts = E;
    a.top_k = K;
    a.routing.renormalize = renormalize;
    a.x = x.data();
    a.ld_x = ld_x;
    a.router = router->host;
    a.gate_up = host_gu.data();
    a.down = host_down.data();
    a.ld_out = ld_out;
    std::vector<float> moe_want(tokens * ld_out, 0.0f);
    a.out = moe_want.data();
    ReferenceOps().Moe(a, host_ws);
    auto moe_out = ToDevice(std::vector<float>(tokens * ld_out, 7.0f));
    a.x = dx.get();
    a.router = router->device;
    a.gate_up = device_gu.data();
    a.down = device_down.data();
    a.out = moe_out.get();
    ws.Reset();
    ops->Moe(a, ws);
    ASSERT_EQ(ops->Synchronize(), "");
    const std::vector<float> got = ToHost(moe_out);
    for (int64_t t = 0; t < tokens; ++t) {
      ASSERT_TRUE(AllClose(got.data() + t * ld_out, moe_want.data() + t * ld_out, H, 1e-4f, 1e-4f))
          << "Moe token " << t << " of " << tokens << (renormalize ? " renormalized" : "");
    }
  };
  // The second and third calls find the layer's expert tables already on the device.
  run_moe(T, false);
  run_moe(T, true);
  run_moe(kMaxTokens, false);
  // The same arrays now name the experts in another order, as another model's layer at the same
  // address would: the kept tables must follow.
  std::reverse(host_gu.begin(), host_gu.end());
  std::reverse(host_down.begin(), host_down.end());
  std::reverse(device_gu.begin(), device_gu.end());
  std::reverse(device_down.begin(), device_down.end());
  run_moe(T, false);
}

// Nemotron 3's layer: plain experts on a latent input narrower than the router's, picked by
// sigmoid scores with a correction bias (read on the device) in groups, scaled.
TEST_P(CudaOpsFormatTest, UngatedSigmoidRoutedMoeMatchesReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  Workspace ws(1 << 20, &ops->activation_memory()), host_ws;
  Rng rng(2);
  const int64_t H = 48, L = 24, I = 20, kMaxTokens = 40;
  const int32_t E = 8, K = 3;
  const std::vector<float> hidden = rng.Uniform(kMaxTokens * H);
  const std::vector<float> latent = rng.Uniform(kMaxTokens * L);
  const std::vector<float> bias = rng.Uniform(E, -0.3f, 0.3f);
  auto d_hidden = ToDevice(hidden), d_latent = ToDevice(latent), d_bias = ToDevice(bias);
  std::vector<std::unique_ptr<DeviceWeights>> experts_up, experts_down;
  std::vector<WeightMatrix> host_up, host_down, device_up, device_down;
  for (int32_t e = 0; e < E; ++e) {
    experts_up.push_back(Make(GetParam(), I, L, 40 + e));
    experts_down.push_back(Make(GetParam(), L, I, 50 + e));
    host_up.push_back(experts_up.back()->host);
    host_down.push_back(experts_down.back()->host);
    device_up.push_back(experts_up.back()->device);
    device_down.push_back(experts_down.back()->device);
  }
  const auto router = Make(WeightFormat::kF32, E, H, 60);
  for (int64_t tokens : {int64_t{5}, kMaxTokens}) {
    MoeArgs a;
    a.tokens = tokens;
    a.hidden = L;
    a.intermediate = I;
    a.num_experts = E;
    a.top_k = K;
    a.routing.score = MoeRouting::Score::kSigmoid;
    a.routing.renormalize = true;
    a.routing.bias = bias.data();
    a.routing.groups = 4;
    a.routing.top_groups = 2;
    a.routing.scale = 2.5f;
    a.gated = false;
    a.act = Activation::kReluSquared;
    a.x = latent.data();
    a.ld_x = L;
    a.route_x = hidden.data();
    a.ld_route_x = H;
    a.router = router->host;
    a.gate_up = host_up.data();
    a.down = host_down.data();
    a.ld_out = L;
    std::vector<float> want(tokens * L, 0.0f);
    a.out = want.data();
    ReferenceOps().Moe(a, host_ws);
    auto out = ToDevice(std::vector<float>(tokens * L, 7.0f));
    a.routing.bias = d_bias.get();
    a.x = d_latent.get();
    a.route_x = d_hidden.get();
    a.router = router->device;
    a.gate_up = device_up.data();
    a.down = device_down.data();
    a.out = out.get();
    ws.Reset();
    ops->Moe(a, ws);
    ASSERT_EQ(ops->Synchronize(), "");
    EXPECT_TRUE(AllClose(ToHost(out), want, 1e-4f, 1e-4f)) << tokens << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaOpsFormatTest,
                         ::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                           WeightFormat::kI8),
                         [](const auto& info) {
                           return std::string(WeightFormatName(info.param));
                         });

TEST(CudaOpsTest, GathersWithHostIdsAndAttendsLikeTheReference) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  Workspace ws(1 << 20, &ops->activation_memory()), host_ws;
  const auto table = Make(WeightFormat::kBF16, 30, 64, 5);
  const std::vector<int32_t> ids = {4, 29, 0, 4};
  std::vector<float> want(ids.size() * 64);
  ReferenceOps().GatherRows(table->host, ids, want.data(), 64);
  auto dout = ToDevice(std::vector<float>(want.size(), 0.0f));
  ops->GatherRows(table->device, ids, dout.get(), 64);
  ASSERT_EQ(ops->Synchronize(), "");
  ASSERT_TRUE(AllClose(ToHost(dout), want, 0.0f, 0.0f));

  // Causal attention of 5 new tokens after 11 cached ones, one page table for all.
  Rng rng(6);
  const int32_t heads = 4, kv_heads = 2, dh = 32, pt = 8;
  const int64_t positions = 16, pages = 2, page_floats = 2 * kv_heads * pt * dh;
  std::vector<float> cache = rng.Uniform(pages * page_floats);
  auto dcache = ToDevice(cache);
  std::vector<float*> host_pages = {cache.data(), cache.data() + page_floats};
  auto dpages = ToDevice(std::vector<float*>{dcache.get(), dcache.get() + page_floats});
  const std::vector<float> q = rng.Uniform(5 * heads * dh);
  auto dq = ToDevice(q);
  AttentionArgs a;
  a.tokens = 5;
  a.start_pos = positions - 5;
  a.heads = heads;
  a.q = q.data();
  a.ld_q = a.ld_out = heads * dh;
  a.kv = {host_pages.data(), pt, kv_heads, dh, 0};
  a.scale = 0.17f;
  std::vector<float> attn_want(5 * heads * dh);
  a.out = attn_want.data();
  ReferenceOps().Attention(a, host_ws);
  auto dattn = ToDevice(std::vector<float>(attn_want.size(), 0.0f));
  a.q = dq.get();
  a.kv.pages = dpages.get();
  a.out = dattn.get();
  ops->Attention(a, ws);
  ASSERT_EQ(ops->Synchronize(), "");
  ASSERT_TRUE(AllClose(ToHost(dattn), attn_want, 1e-5f, 1e-4f));
}

TEST(CudaOpsTest, ARefusedCallIsReportedAndSkipsWhatFollows) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  auto x = ToDevice(std::vector<float>(64, 1.0f));
  ops->Rope(x.get(), 8, 1, 1, 7, 0, 10000.0f);       // odd head_dim: refused
  ops->CopyRows(x.get() + 32, 8, 1, 8, x.get(), 8);  // skipped
  const std::string error = ops->Synchronize();
  EXPECT_NE(error.find("Rope"), std::string::npos) << error;
  EXPECT_EQ(ToHost(x), std::vector<float>(64, 1.0f));
  // Cleared: calls run again.
  auto y = ToDevice(std::vector<float>(8, 2.0f));
  ops->AddRows(y.get(), 8, 1, 8, x.get(), 8);
  EXPECT_EQ(ops->Synchronize(), "");
  EXPECT_EQ(ToHost(x)[0], 3.0f);
}

// A GPU that is not there is refused by name, and the refusal is not reported again by the
// next sound launch on the same thread (the runtime keeps a failed call's error as the thread's
// last error, which launches are checked with).
TEST(CudaOpsTest, AFailedOpenIsNotReportedByTheNextLaunch) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  std::string error;
  EXPECT_EQ(CudaOps::Create(4096, &error), nullptr);
  EXPECT_NE(error.find("CUDA device 4096"), std::string::npos) << error;
  DeviceBuffer<float> too_big;
  EXPECT_NE(too_big.Allocate(size_t{1} << 50), cudaSuccess);  // a petabyte: out of memory
  auto ops = NewOps();
  ASSERT_NE(ops, nullptr);
  auto x = ToDevice(std::vector<float>(8, 1.0f)), y = ToDevice(std::vector<float>(8, 2.0f));
  ops->AddRows(y.get(), 8, 1, 8, x.get(), 8);
  EXPECT_EQ(ops->Synchronize(), "");
  EXPECT_EQ(ToHost(x)[0], 3.0f);
}

}  // namespace
}  // namespace tandem::kernels::cuda
