// The device half of MoE routing (kernels/cuda/moe_kernels.h): the top-k choice against the
// host's RouteToken, the stable bucketing by expert, and the combination in token order.
// Skips without a CUDA device.
#include "kernels/cuda/moe_kernels.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/moe_routing.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::AllClose;
using kernels::testing::Rng;
using testing::ToDevice;
using testing::ToHost;

TEST(CudaMoeKernelsTest, RouteChoosesWhatTheHostChooses) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t tokens = 37;
  const int32_t experts = 16, top_k = 3;
  std::vector<float> logits = Rng(3).Uniform(tokens * experts, -4, 4);
  logits[5 * experts + 3] = logits[5 * experts + 9] = 10.0f;  // a tie: the lower expert first
  const std::vector<float> bias = Rng(4).Uniform(experts, -0.5f, 0.5f);
  auto dbias = ToDevice(bias);
  std::vector<MoeRouting> routings(3);
  routings[1].renormalize = true;
  MoeRouting& sigmoid = routings[2];  // Nemotron 3's
  sigmoid.score = MoeRouting::Score::kSigmoid;
  sigmoid.renormalize = true;
  sigmoid.groups = 4;
  sigmoid.top_groups = 2;
  sigmoid.scale = 2.5f;
  for (MoeRouting routing : routings) {
    const bool biased = routing.score == MoeRouting::Score::kSigmoid;
    std::vector<int32_t> want_chosen(tokens * top_k);
    std::vector<float> want_weights(tokens * top_k);
    if (biased) routing.bias = bias.data();
    for (int64_t t = 0; t < tokens; ++t) {
      RouteToken(logits.data() + t * experts, experts, top_k, routing,
                 want_chosen.data() + t * top_k, want_weights.data() + t * top_k);
    }
    if (biased) routing.bias = dbias.get();
    auto dlogits = ToDevice(logits);
    auto dchosen = ToDevice(std::vector<int32_t>(tokens * top_k, -1));
    auto dweights = ToDevice(std::vector<float>(tokens * top_k, 0.0f));
    ASSERT_CUDA_OK(MoeRoute(nullptr, dlogits.get(), tokens, experts, top_k, routing,
                            dchosen.get(), dweights.get()));
    EXPECT_EQ(ToHost(dchosen), want_chosen);
    EXPECT_TRUE(AllClose(ToHost(dweights), want_weights, 1e-6f, 1e-5f));
  }
}

TEST(CudaMoeKernelsTest, BucketsAreStableAndCombineSumsInTokenOrder) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t tokens = 4, hidden = 3;
  const int32_t experts = 3, top_k = 2;
  const std::vector<int32_t> chosen = {2, 0, 0, 1, 2, 1, 0, 2};
  auto dchosen = ToDevice(chosen);
  auto doffsets = ToDevice(std::vector<int64_t>(experts + 1, -1));
  auto drows = ToDevice(std::vector<int32_t>(tokens * top_k, -1));
  auto dposition = ToDevice(std::vector<int32_t>(tokens * top_k, -1));
  ASSERT_CUDA_OK(MoeBucket(nullptr, dchosen.get(), tokens, experts, top_k, doffsets.get(),
                           drows.get(), dposition.get()));
  EXPECT_EQ(ToHost(doffsets), (std::vector<int64_t>{0, 3, 5, 8}));
  EXPECT_EQ(ToHost(drows), (std::vector<int32_t>{0, 1, 3, 1, 2, 0, 2, 3}));
  const std::vector<int32_t> position = ToHost(dposition);
  EXPECT_EQ(position, (std::vector<int32_t>{5, 0, 1, 3, 6, 4, 2, 7}));

  // Bucketed row i holds the value 10·i + column; token t weighs its choices 1 and 0.5.
  std::vector<float> y(tokens * top_k * hidden);
  for (int64_t i = 0; i < tokens * top_k; ++i) {
    for (int64_t c = 0; c < hidden; ++c) y[i * hidden + c] = 10.0f * i + c;
  }
  const std::vector<float> weights = {1, 0.5f, 1, 0.5f, 1, 0.5f, 1, 0.5f};
  auto dy = ToDevice(y), dweights = ToDevice(weights);
  auto dout = ToDevice(std::vector<float>(tokens * hidden, -1.0f));
  ASSERT_CUDA_OK(MoeCombine(nullptr, dy.get(), hidden, dposition.get(), dweights.get(), tokens,
                            top_k, hidden, dout.get(), hidden));
  std::vector<float> want(tokens * hidden);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < hidden; ++c) {
      want[t * hidden + c] =
          y[position[t * top_k] * hidden + c] + 0.5f * y[position[t * top_k + 1] * hidden + c];
    }
  }
  EXPECT_EQ(ToHost(dout), want);
}

}  // namespace
}  // namespace tandem::kernels::cuda
