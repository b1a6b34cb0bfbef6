// Drives a Scheduler synchronously over a fixture model, for deterministic engine tests.
#ifndef TANDEM_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
#define TANDEM_TESTS_ENGINE_ENGINE_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cache/allocator_factory.h"
#include "engine/cache_model_spec.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "models/hydragen_config.h"
#include "models/model.h"
#include "tests/fixture_families.h"
#include "tests/test_tokens.h"

namespace tandem::engine::testing {

// A fixture under tests/data: the source tree's, or the directory the environment's
// TANDEM_TEST_DATA names (a test binary carried to a GPU machine by scripts/gpu-check.sh).
inline std::string Fixture(const std::string& path) {
  const char* moved = std::getenv("TANDEM_TEST_DATA");
  return std::string(moved != nullptr ? moved : TANDEM_TEST_DATA) + "/" + path;
}

inline std::unique_ptr<models::Model> LoadFixtureModel(const std::string& name,
                                                       int32_t page_tokens = 16) {
  models::LoadOptions options;
  options.page_tokens = page_tokens;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  auto model = models::Model::Load(Fixture("models/" + name), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// A test name for a fixture-model parameter ("jamba-tiny" -> "jamba_tiny").
inline std::string FixtureTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// Logits of two backends that sum in different orders: the largest difference within
// `relative` of the largest logit (a wrong op moves logits by their own size).
inline ::testing::AssertionResult LogitsNear(const std::vector<float>& got,
                                             const std::vector<float>& want, float relative) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " logits, want " << want.size();
  }
  float scale = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    worst = std::max(worst, std::fabs(got[i] - want[i]));
  }
  if (worst <= relative * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "largest difference " << worst << " against a logit scale of " << scale;
}

// What a finished request produced.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<std::vector<TopLogprob>> logprobs;  // when the request asked for them
  std::string text;  // every event's text, when the scheduler has a tokenizer
  Event finished;
  // Request::prompt_logprobs, and the index of the event that carried them (-1: none did).
  std::vector<std::vector<TopLogprob>> prompt_logprobs;
  int prompt_logprobs_event = -1;
};

inline Outcome Drain(RequestStream& stream) {
  Outcome out;
  Event e;
  for (int index = 0; stream.Next(&e); ++index) {
    out.text += e.text;
    if (!e.prompt_logprobs.empty()) {
      EXPECT_EQ(out.prompt_logprobs_event, -1) << "prompt logprobs came twice";
      out.prompt_logprobs = e.prompt_logprobs;
      out.prompt_logprobs_event = index;
    }
    if (e.kind == Event::Kind::kTokens) {
      out.tokens.insert(out.tokens.end(), e.tokens.begin(), e.tokens.end());
      out.logprobs.insert(out.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    } else {
      out.finished = e;
    }
  }
  return out;
}

// Whether two runs' logprobs are bit-identical: the same tokens listed in the same order with
// the same float values.
inline bool SameLogprobs(const std::vector<std::vector<TopLogprob>>& a,
                         const std::vector<std::vector<TopLogprob>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (size_t j = 0; j < a[i].size(); ++j) {
      if (a[i][j].token != b[i][j].token || a[i][j].logprob != b[i][j].logprob) return false;
    }
  }
  return true;
}

// The compute backend a harness runs on: the reference loops, the CPU backend as the engine
// creates it (batch-invariant), or the CPU backend in its fastest, not batch-invariant mode.
enum class Backend { kReference, kCpu, kCpuFast };

inline const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kReference:
      return "reference";
    case Backend::kCpu:
      return "cpu";
    case Backend::kCpuFast:
      return "cpu-fast";
  }
  return "?";
}

inline std::unique_ptr<kernels::Ops> MakeOps(Backend b) {
  return b == Backend::kReference ? kernels::MakeReferenceOps()
                                  : kernels::MakeCpuOps(2, /*batch_invariant=*/b == Backend::kCpu);
}

class SchedulerHarness {
 public:
  SchedulerHarness(const models::Model& model, CachePolicy policy, size_t memory_bytes,
                   SchedulerConfig config = {}, Backend backend = Backend::kCpu,
                   const std::string& allocator = "avmp-dynamic",
                   const models::HydragenConfig& hydragen = {},
                   const models::Tokenizer* tokenizer = nullptr) {
    auto spec = CacheModelSpecFor(model.config(), "fixture");
    EXPECT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    cache::AllocatorOptions options;
    options.budget_bytes = memory_bytes;
    options.page_tokens = static_cast<size_t>(model.layout().page_tokens());
    options.backing = cache::BackingKind::kHost;
    options.min_rebalance_interval_ops = 8;
    options.migration_batch_size = 8;
    auto named = cache::CreateAllocator(allocator, spec_, options);
    EXPECT_TRUE(named.ok()) << named.status();
    allocator_ = std::move(named->allocator);
    runner_ = std::make_unique<ModelRunner>(model, MakeOps(backend), hydragen);
    config.cache.policy = policy;
    config.cache.tuner.synchronous = true;
    scheduler_ =
        std::make_unique<Scheduler>(model, tokenizer, allocator_.get(), spec_, runner_.get(), config);
  }

  std::shared_ptr<RequestStream> Add(Request request) {
    EXPECT_TRUE(scheduler_->Validate(request).ok()) << scheduler_->Validate(request);
    auto stream = std::make_shared<RequestStream>(next_id_);
    scheduler_->Add(next_id_++, std::move(request), stream, Clock::now());
    return stream;
  }
  // Engine::SubmitChoices' queueing, without the engine's thread: `n` choices of `request`,
  // choice i seeded with ChoiceSeed(seed, i), the others waiting for the first.
  std::vector<std::shared_ptr<RequestStream>> AddChoices(const Request& request, int32_t n) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    const RequestId first = next_id_;
    for (int32_t i = 0; i < n; ++i) {
      Request choice = request;
      choice.sampling.seed = ChoiceSeed(request.sampling.seed, i);
      streams.push_back(std::make_shared<RequestStream>(next_id_));
      scheduler_->Add(next_id_++, std::move(choice), streams.back(), Clock::now(),
                      i > 0 ? first : 0);
    }
    return streams;
  }
  void RunUntilIdle(int max_steps = 100000) {
    for (int i = 0; i < max_steps && !scheduler_->idle(); ++i) scheduler_->Step();
    EXPECT_TRUE(scheduler_->idle());
  }
  Outcome Run(Request request) {
    auto stream = Add(std::move(request));
    RunUntilIdle();
    return Drain(*stream);
  }

  Scheduler& scheduler() { return *scheduler_; }
  cache::BlockAllocator& allocator() { return *allocator_; }
  size_t used(cache::Pool pool) const { return allocator_->stats(pool).used_units; }

 private:
  cache::ModelSpec spec_;
  std::unique_ptr<cache::BlockAllocator> allocator_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  RequestId next_id_ = 1;
};

// Hydragen on every page a batch's decode rows share, however little: on the batch-invariant CPU
// backend it resumes each row's own attention (bit for bit a lone request's), so tests that compare
// such runs bit for bit make it run wherever it can.
inline models::HydragenConfig SharingEveryPage() {
  models::HydragenConfig every;
  every.min_shared_work = 0;
  return every;
}

inline Request Greedy(std::vector<int32_t> prompt, int32_t max_new_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.ignore_eos = true;  // random fixture models: keep lengths fixed
  return r;
}

// Prefill chunks of 32 tokens in steps of 128: a prompt of a few dozen tokens takes several
// chunks, and several sequences share a step.
inline SchedulerConfig SmallSteps() {
  SchedulerConfig config;
  config.prefill_chunk = 32;
  config.step_tokens = 128;
  return config;
}

// Greedy with the chosen token's and the top 5 logprobs, to compare runs' logits.
inline Request GreedyWithLogprobs(std::vector<int32_t> prompt, int32_t max_new_tokens) {
  Request r = Greedy(std::move(prompt), max_new_tokens);
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 5;
  return r;
}

using ::tandem::testing::Tokens;  // tests/test_tokens.h

// Two turns of one conversation through `engine`, greedy with logprobs: the second prompt is the
// first prompt, its answer and a new message, so the second turn can restore the first's state
// from the prefix cache. Outcomes in turn order.
template <typename EngineT>
std::vector<Outcome> TwoTurns(EngineT& engine, int32_t vocab, int32_t new_tokens) {
  std::vector<int32_t> prompt = Tokens(45, 7, vocab);
  std::vector<Outcome> outcomes;
  for (int turn = 0; turn < 2; ++turn) {
    auto stream = engine.Submit(GreedyWithLogprobs(prompt, new_tokens));
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) break;
    outcomes.push_back(Drain(**stream));
    const std::vector<int32_t> message = Tokens(13, 8, vocab);
    prompt.insert(prompt.end(), outcomes.back().tokens.begin(), outcomes.back().tokens.end());
    prompt.insert(prompt.end(), message.begin(), message.end());
  }
  return outcomes;
}

// `a` followed by `b`.
inline std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Calls test(model, vocab_size) with each fixture family's model.
template <typename Test>
void ForEachFamily(Test test) {
  for (const std::string& name : ::tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    test(*model, model->config().vocab_size);
  }
}

}  // namespace tandem::engine::testing

#endif  // TANDEM_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
