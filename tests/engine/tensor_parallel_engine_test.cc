// The engine over a model split across worker threads (models/tensor_parallel_group.h): the
// real scheduler, prefix cache and allocator drive the group's lead as they drive a whole model.
// A conversation's turns must give the whole model's greedy tokens (logprobs within the rounding
// of sums taken in another order), the second turn must restore the first from the cache, and a
// cache hit must give the bits of a cache miss of the same split model.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "models/tensor_parallel_group.h"
#include "tests/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::Fixture;
using testing::Outcome;

EngineConfig Config(int threads) {
  EngineConfig config;
  config.memory_bytes = 32 << 20;
  config.threads = threads;
  config.scheduler.prefill_chunk = 24;
  config.scheduler.step_tokens = 96;
  config.scheduler.cache.policy = CachePolicy::kMarconi;
  return config;
}

models::LoadOptions Options() {
  models::LoadOptions options;
  options.page_tokens = 16;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  return options;
}

std::shared_ptr<const models::Model> Load(const std::string& name, int32_t workers) {
  absl::StatusOr<std::shared_ptr<const models::Model>> model =
      models::LoadModel(Fixture("models/" + name), Options(), workers,
                        [](int32_t) { return kernels::MakeCpuOps(1, /*batch_invariant=*/true); });
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

double MaxLogprobDiff(const Outcome& a, const Outcome& b) {
  double worst = 0;
  for (size_t i = 0; i < a.logprobs.size() && i < b.logprobs.size(); ++i) {
    if (a.logprobs[i].empty() || b.logprobs[i].empty()) return INFINITY;
    worst = std::max(worst, std::fabs(double{a.logprobs[i][0].logprob} - b.logprobs[i][0].logprob));
  }
  return worst;
}

class TensorParallelEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelEngineTest, TurnsMatchTheWholeModelAndHitsMatchMisses) {
  const std::shared_ptr<const models::Model> whole = Load(GetParam(), 1);
  const std::shared_ptr<const models::Model> split = Load(GetParam(), 2);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(split, nullptr);
  const int32_t vocab = whole->config().vocab_size;

  auto whole_engine = Engine::Create(*whole, nullptr, Config(2));
  ASSERT_TRUE(whole_engine.ok()) << whole_engine.status();
  const std::vector<Outcome> want = testing::TwoTurns(**whole_engine, vocab, 8);
  auto split_engine = Engine::Create(*split, nullptr, Config(1));
  ASSERT_TRUE(split_engine.ok()) << split_engine.status();
  const std::vector<Outcome> got = testing::TwoTurns(**split_engine, vocab, 8);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  for (size_t turn = 0; turn < 2; ++turn) {
    EXPECT_EQ(got[turn].finished.finish_reason, FinishReason::kLength) << got[turn].finished.error;
    EXPECT_EQ(got[turn].tokens, want[turn].tokens) << "turn " << turn;
    EXPECT_LT(MaxLogprobDiff(got[turn], want[turn]), 1e-4) << "turn " << turn;
  }
  // The second turn found the first in the cache, every worker's part of its state with it.
  EXPECT_GT(got[1].finished.usage.cached_tokens, 0);

  // The second turn's prompt cold, on a fresh engine over the same split model: a hit is a miss.
  std::vector<int32_t> prompt = testing::Tokens(45, 7, vocab);
  prompt.insert(prompt.end(), got[0].tokens.begin(), got[0].tokens.end());
  const std::vector<int32_t> message = testing::Tokens(13, 8, vocab);
  prompt.insert(prompt.end(), message.begin(), message.end());
  (*split_engine)->Shutdown();
  auto cold_engine = Engine::Create(*split, nullptr, Config(1));
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.status();
  auto stream = (*cold_engine)->Submit(testing::GreedyWithLogprobs(prompt, 8));
  ASSERT_TRUE(stream.ok()) << stream.status();
  const Outcome cold = testing::Drain(**stream);
  EXPECT_EQ(cold.finished.usage.cached_tokens, 0);
  EXPECT_EQ(cold.tokens, got[1].tokens);
  EXPECT_TRUE(testing::SameLogprobs(cold.logprobs, got[1].logprobs));
}

// Speculation on a split model: each worker saves and restores its part of the SSM state
// after each drafted token, so a prediction (here wrong in one place) leaves the split model's
// output bit for bit as it was.
TEST_P(TensorParallelEngineTest, APredictionChangesNothingOnASplitModel) {
  const std::shared_ptr<const models::Model> split = Load(GetParam(), 2);
  ASSERT_NE(split, nullptr);
  const int32_t vocab = split->config().vocab_size;
  EngineConfig plain_config = Config(1);
  plain_config.scheduler.speculation.draft_tokens = 0;
  auto plain_engine = Engine::Create(*split, nullptr, plain_config);
  ASSERT_TRUE(plain_engine.ok()) << plain_engine.status();
  const Request request = testing::GreedyWithLogprobs(testing::Tokens(37, 9, vocab), 20);
  auto plain_stream = (*plain_engine)->Submit(request);
  ASSERT_TRUE(plain_stream.ok()) << plain_stream.status();
  const Outcome plain = testing::Drain(**plain_stream);
  (*plain_engine)->Shutdown();

  auto engine = Engine::Create(*split, nullptr, Config(1));
  ASSERT_TRUE(engine.ok()) << engine.status();
  Request predicted = request;
  predicted.prediction = plain.tokens;
  // Wrong at output position 8: inside the second draft (positions 6-9), so it is refused there.
  predicted.prediction[8] = (predicted.prediction[8] + 1) % vocab;
  auto stream = (*engine)->Submit(predicted);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const Outcome got = testing::Drain(**stream);
  EXPECT_EQ(got.tokens, plain.tokens);
  EXPECT_TRUE(testing::SameLogprobs(got.logprobs, plain.logprobs));
  EXPECT_GT(got.finished.usage.accepted_draft_tokens, 0);
  EXPECT_GT(got.finished.usage.rejected_draft_tokens, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, TensorParallelEngineTest,
                         ::testing::Values("jamba-tiny", "zamba2-tiny", "mamba2-tiny",
                                           "granite-tiny", "nemotron3-tiny"),
                         testing::FixtureTestName);

}  // namespace
}  // namespace tandem::engine
