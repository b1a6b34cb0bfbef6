// The thread-safe engine API: concurrent submissions, streaming, cancellation, shutdown, errors.
#include <chrono>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::Drain;
using testing::Greedy;
using testing::LoadFixtureModel;
using testing::Outcome;
using testing::SchedulerHarness;
using testing::Tokens;

EngineConfig SmallConfig(CachePolicy policy) {
  EngineConfig config;
  config.memory_bytes = 32 << 20;
  config.threads = 2;
  config.scheduler.prefill_chunk = 24;
  config.scheduler.step_tokens = 96;
  config.scheduler.cache.policy = policy;
  return config;
}

// The push listener lets one thread serve many streams without polling: it runs on every push,
// at once when set over waiting events, and never after it is cleared.
TEST(RequestStreamTest, PushListenerRunsOnEveryPushUntilCleared) {
  RequestStream stream(7);
  Event tokens;
  tokens.kind = Event::Kind::kTokens;
  tokens.tokens = {5};
  stream.Push(tokens);
  int calls = 0;
  stream.SetPushListener([&] { ++calls; });
  EXPECT_EQ(calls, 1);  // an event was already waiting
  stream.Push(tokens);
  EXPECT_EQ(calls, 2);
  // Pushed from another thread, as the engine loop does: the listener runs there.
  std::thread engine_loop([&] { stream.Push(tokens); });
  engine_loop.join();
  EXPECT_EQ(calls, 3);
  stream.SetPushListener(nullptr);
  Event finished;
  finished.kind = Event::Kind::kFinished;
  stream.Push(finished);
  EXPECT_EQ(calls, 3);
  Event e;
  int read = 0;
  while (stream.Next(&e)) ++read;
  EXPECT_EQ(read, 4);
  // Cleared, then set again over an empty queue: nothing to report.
  RequestStream empty(8);
  empty.SetPushListener([&] { ++calls; });
  EXPECT_EQ(calls, 3);
}

TEST(EngineApiTest, ConcurrentClientsGetTheirSoloOutputs) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  constexpr int kClients = 4, kPerClient = 3;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kClients * kPerClient; ++i) prompts.push_back(Tokens(10 + 7 * i, i, vocab));
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) {
    SchedulerHarness h(*model, CachePolicy::kNone, 32 << 20);
    solo.push_back(h.Run(Greedy(p, 10)).tokens);
  }
  auto engine = Engine::Create(*model, nullptr, SmallConfig(CachePolicy::kMarconi));
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int j = 0; j < kPerClient; ++j) {
        const int i = c * kPerClient + j;
        auto stream = (*engine)->Submit(Greedy(prompts[i], 10));
        ASSERT_TRUE(stream.ok()) << stream.status();
        Outcome out = Drain(**stream);
        EXPECT_EQ(out.finished.finish_reason, FinishReason::kLength);
        EXPECT_GE(out.finished.timings.first_token, out.finished.timings.queued);
        EXPECT_GE(out.finished.timings.finished, out.finished.timings.first_token);
        got[i] = out.tokens;
      }
    });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], solo[i]) << "request " << i;
  (*engine)->Drain();  // the stats snapshot is taken after the step that finished the last one
  const SchedulerStats stats = (*engine)->stats();
  EXPECT_EQ(stats.finished, prompts.size());
  EXPECT_EQ(stats.running + stats.waiting, 0u);
  EXPECT_EQ(stats.generated_tokens, 10 * prompts.size());
}

TEST(EngineApiTest, CancelStopsARunningRequestAndFreesItsMemory) {
  auto model = LoadFixtureModel("zamba2-tiny");
  ASSERT_NE(model, nullptr);
  auto engine = Engine::Create(*model, nullptr, SmallConfig(CachePolicy::kNone));
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto stream = (*engine)->Submit(Greedy(Tokens(30, 1, 1024), 4000));
  ASSERT_TRUE(stream.ok());
  Event e;
  ASSERT_TRUE((*stream)->Next(&e));  // the first token: it is decoding now
  EXPECT_EQ(e.kind, Event::Kind::kTokens);
  EXPECT_TRUE((*engine)->Cancel((*stream)->id()));
  Outcome rest = Drain(**stream);
  EXPECT_EQ(rest.finished.finish_reason, FinishReason::kCancelled);
  EXPECT_LT(rest.finished.usage.completion_tokens, 4000);
  EXPECT_FALSE((*engine)->Cancel((*stream)->id()));
  EXPECT_FALSE((*engine)->Cancel(12345));
  (*engine)->Drain();
  const SchedulerStats stats = (*engine)->stats();
  EXPECT_EQ(stats.cancelled, 1u);
  EXPECT_EQ(stats.memory.pools[0].used_units + stats.memory.pools[1].used_units, 0u);
}

// Once quiet after some work the loop returns freed heap memory to the OS, once per quiet
// period: an engine that never worked, or that stays quiet, does not trim again.
TEST(EngineApiTest, GoingQuietAfterWorkReturnsFreedHeapOnce) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  EngineConfig config = SmallConfig(CachePolicy::kMarconi);
  config.idle_trim_seconds = 0.01;
  auto engine = Engine::Create(*model, nullptr, config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->heap_trims(), 0u);
  auto wait_for_trims = [&](uint64_t n) {
    for (int i = 0; i < 2000 && (*engine)->heap_trims() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return (*engine)->heap_trims();
  };
  for (uint64_t round = 1; round <= 2; ++round) {
    auto stream = (*engine)->Submit(
        Greedy(Tokens(30, static_cast<uint32_t>(round), model->config().vocab_size), 4));
    ASSERT_TRUE(stream.ok());
    Drain(**stream);
    EXPECT_EQ(wait_for_trims(round), round);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // quiet, no work: no trim
  EXPECT_EQ((*engine)->heap_trims(), 2u);
}

TEST(EngineApiTest, ShutdownCancelsEverythingAndRefusesNewRequests) {
  auto model = LoadFixtureModel("mamba2-tiny");
  ASSERT_NE(model, nullptr);
  auto engine = Engine::Create(*model, nullptr, SmallConfig(CachePolicy::kMarconi));
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 5; ++i) {
    auto s = (*engine)->Submit(Greedy(Tokens(20, i, 1024), 4000));
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  (*engine)->Shutdown();
  for (auto& s : streams) {
    EXPECT_EQ(Drain(*s).finished.finish_reason, FinishReason::kCancelled);
  }
  auto refused = (*engine)->Submit(Greedy({5, 6}, 2));
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
}

TEST(EngineApiTest, SubmitRefusesBadRequestsAndAFullQueue) {
  auto model = LoadFixtureModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  EngineConfig config = SmallConfig(CachePolicy::kNone);
  auto engine = Engine::Create(*model, nullptr, config);
  ASSERT_TRUE(engine.ok());
  auto bad = (*engine)->Submit(Greedy({5, 99999}, 2));
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("prompt[1]"), std::string::npos);
  Request biased = Greedy({5, 6}, 2);
  biased.sampling.logit_bias = {{99999, 1.0f}};
  auto outside = (*engine)->Submit(biased);
  EXPECT_TRUE(absl::IsInvalidArgument(outside.status()));
  EXPECT_NE(outside.status().message().find("logit_bias: token id 99999 is outside the vocabulary"),
            std::string::npos)
      << outside.status();

  config.max_waiting = 0;  // no queue at all
  auto full = Engine::Create(*model, nullptr, config);
  ASSERT_TRUE(full.ok());
  auto refused = (*full)->Submit(Greedy({5, 6}, 2));
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();

  config = SmallConfig(CachePolicy::kNone);
  config.allocator = "padded-unified";
  EXPECT_TRUE(absl::IsInvalidArgument(Engine::Create(*model, nullptr, config).status()));
  config.allocator = "avmp-dynamic";
  config.scheduler.prefill_chunk = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Engine::Create(*model, nullptr, config).status()));
}

// SubmitChoices: n streams with consecutive ids, choice i the output of a lone request seeded
// with ChoiceSeed(seed, i); n outside [1, kMaxChoices] and a queue without room for all n are
// refused, naming why.
TEST(EngineApiTest, SubmitChoicesGivesEachChoiceItsLoneOutput) {
  auto model = LoadFixtureModel("zamba2-tiny");
  ASSERT_NE(model, nullptr);
  EngineConfig config = SmallConfig(CachePolicy::kMarconi);
  config.hydragen.min_shared_work = 0;  // choices decode beside each other; compared bit for bit
  auto engine = Engine::Create(*model, nullptr, config);
  ASSERT_TRUE(engine.ok());
  Request request = Greedy(Tokens(50, 4, model->config().vocab_size), 8);
  request.sampling.greedy = false;
  request.sampling.temperature = 1.5f;
  request.sampling.seed = 77;
  auto streams = (*engine)->SubmitChoices(request, 3);
  ASSERT_TRUE(streams.ok()) << streams.status();
  ASSERT_EQ(streams->size(), 3u);
  std::vector<Outcome> choices;
  for (auto& stream : *streams) choices.push_back(Drain(*stream));
  for (int32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*streams)[i]->id(), (*streams)[0]->id() + static_cast<RequestId>(i));
    Request alone = request;
    alone.sampling.seed = ChoiceSeed(77, i);
    auto stream = (*engine)->Submit(alone);
    ASSERT_TRUE(stream.ok());
    EXPECT_EQ(Drain(**stream).tokens, choices[i].tokens);
  }
  EXPECT_EQ(ChoiceSeed(77, 0), 77u);

  for (const int32_t n : {0, -1, kMaxChoices + 1}) {
    auto refused = (*engine)->SubmitChoices(request, n);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << n;
    EXPECT_NE(refused.status().message().find("n: "), std::string::npos) << refused.status();
  }
  config.max_waiting = 2;
  auto small = Engine::Create(*model, nullptr, config);
  ASSERT_TRUE(small.ok());
  auto full = (*small)->SubmitChoices(request, 3);
  EXPECT_TRUE(absl::IsResourceExhausted(full.status())) << full.status();
  EXPECT_NE(full.status().message().find("no room for 3 choices"), std::string::npos)
      << full.status();
  auto fits = (*small)->SubmitChoices(request, 2);
  ASSERT_TRUE(fits.ok()) << fits.status();
  for (auto& stream : *fits) {
    EXPECT_EQ(Drain(*stream).finished.finish_reason, FinishReason::kLength);
  }
}

}  // namespace
}  // namespace tandem::engine
