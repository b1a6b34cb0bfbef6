// Speculative decoding through the real scheduler (SpeculationConfig): whatever the draft, the
// output must be the one plain decoding gives, token for token and logprob for logprob, on every
// family. Drafts come from a client's prediction (all right, partly wrong, entirely wrong) or
// from the sequence itself; the runs cover seeded sampling with penalties, batches that mix
// speculating, decoding and prefilling sequences, a stop inside an accepted draft, the request's
// length limit, scarce SSM blocks, and the prefix cache's state after speculation (a later hit
// must give the bits of a miss).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "models/hydragen_config.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using testing::Backend;
using testing::Drain;
using testing::LoadFixtureModel;
using testing::Outcome;
using testing::SameLogprobs;
using testing::SchedulerHarness;
using testing::Tokens;

constexpr size_t kMiB = size_t{1} << 20;

SchedulerConfig Speculating(int32_t draft_tokens) {
  SchedulerConfig config;
  config.prefill_chunk = 32;
  config.step_tokens = 128;
  config.speculation.draft_tokens = draft_tokens;
  config.speculation.prompt_lookup = true;
  return config;
}

class SpeculativeDecodingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = LoadFixtureModel(GetParam());
    ASSERT_NE(model_, nullptr);
    vocab_ = model_->config().vocab_size;
  }

  // A lone run without speculation: what every speculative run must reproduce.
  Outcome Plainly(const Request& request) {
    SchedulerHarness plain(*model_, CachePolicy::kNone, 64 * kMiB, Speculating(0), Backend::kCpu,
                           "avmp-dynamic", testing::SharingEveryPage());
    return plain.Run(request);
  }

  std::unique_ptr<SchedulerHarness> Harness(int32_t draft_tokens, size_t memory = 64 * kMiB,
                                            CachePolicy policy = CachePolicy::kMarconi) {
    return Harness(Speculating(draft_tokens), memory, policy);
  }
  std::unique_ptr<SchedulerHarness> Harness(const SchedulerConfig& config,
                                            size_t memory = 64 * kMiB,
                                            CachePolicy policy = CachePolicy::kMarconi) {
    return std::make_unique<SchedulerHarness>(*model_, policy, memory, config, Backend::kCpu,
                                              "avmp-dynamic", testing::SharingEveryPage());
  }

  std::unique_ptr<models::Model> model_;
  int32_t vocab_ = 0;
};

void ExpectSameOutput(const Outcome& got, const Outcome& want) {
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_TRUE(SameLogprobs(got.logprobs, want.logprobs));
  EXPECT_EQ(got.finished.finish_reason, want.finished.finish_reason) << got.finished.error;
  EXPECT_EQ(got.finished.usage.completion_tokens, want.finished.usage.completion_tokens);
}

TEST_P(SpeculativeDecodingTest, ARightPredictionIsAcceptedAndChangesNothing) {
  const Request request = testing::GreedyWithLogprobs(Tokens(40, 7, vocab_), 30);
  const Outcome plain = Plainly(request);
  ASSERT_EQ(plain.tokens.size(), 30u);

  Request predicted = request;
  predicted.prediction = plain.tokens;
  auto speculating = Harness(4);
  const Outcome got = speculating->Run(predicted);
  ExpectSameOutput(got, plain);
  // After the prompt's first token, each step verifies four drafted tokens, all right, and
  // emits five; the last step drafts three (the limit leaves room for four tokens).
  const Usage& usage = got.finished.usage;
  EXPECT_EQ(usage.accepted_draft_tokens, 23);
  EXPECT_EQ(usage.rejected_draft_tokens, 0);
  const SchedulerStats stats = speculating->scheduler().stats();
  EXPECT_EQ(stats.accepted_draft_tokens, 23u);
  EXPECT_EQ(stats.draft_tokens, 23u);
  // The borrowed SSM blocks went back; nothing but the cache holds memory.
  EXPECT_EQ(stats.memory_usage_ratio(), 0.0);
}

TEST_P(SpeculativeDecodingTest, WrongPredictionsCostOnlyRejectedTokens) {
  const Request request = testing::GreedyWithLogprobs(Tokens(33, 8, vocab_), 28);
  const Outcome plain = Plainly(request);
  for (const int every : {5, 2, 1}) {
    SCOPED_TRACE(every);
    Request predicted = request;
    predicted.prediction = plain.tokens;
    // Every `every`-th token wrong (every one: a prediction with nothing right).
    for (size_t i = 3; i < predicted.prediction.size(); i += every) {
      predicted.prediction[i] = (predicted.prediction[i] + 1) % vocab_;
    }
    auto speculating = Harness(6);
    const Outcome got = speculating->Run(predicted);
    ExpectSameOutput(got, plain);
    EXPECT_GT(got.finished.usage.rejected_draft_tokens, 0);
    const SchedulerStats stats = speculating->scheduler().stats();
    EXPECT_EQ(stats.draft_tokens, static_cast<uint64_t>(got.finished.usage.accepted_draft_tokens +
                                                        got.finished.usage.rejected_draft_tokens));
  }
}

TEST_P(SpeculativeDecodingTest, SeededSamplingWithPenaltiesDrawsTheSameStream) {
  Request request = testing::GreedyWithLogprobs(Tokens(36, 9, vocab_), 32);
  request.sampling.greedy = false;
  request.sampling.temperature = 0.7f;
  request.sampling.top_p = 0.9f;
  request.sampling.top_k = 40;
  request.sampling.repetition_penalty = 1.2f;
  request.sampling.frequency_penalty = 0.3f;
  request.sampling.seed = 1234;
  const Outcome plain = Plainly(request);
  Request predicted = request;
  predicted.prediction = plain.tokens;
  predicted.prediction[10] = (predicted.prediction[10] + 3) % vocab_;
  auto speculating = Harness(5);
  const Outcome got = speculating->Run(predicted);
  ExpectSameOutput(got, plain);
  EXPECT_GT(got.finished.usage.accepted_draft_tokens, 10);
}

TEST_P(SpeculativeDecodingTest, PromptLookupDraftsFromTheSequenceItself) {
  // A prompt that repeats a phrase, and an output over a vocabulary of 1,024 that repeats
  // tokens of the sequence (these random models also fall into loops): with matches of one
  // token allowed, there is always something to draft from.
  std::vector<int32_t> prompt = Tokens(12, 10, vocab_);
  const std::vector<int32_t> phrase = Tokens(9, 11, vocab_);
  for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), phrase.begin(), phrase.end());
  prompt.insert(prompt.end(), phrase.begin(), phrase.begin() + 4);
  const Request request = testing::GreedyWithLogprobs(prompt, 48);
  const Outcome plain = Plainly(request);
  SchedulerConfig config = Speculating(4);
  config.speculation.min_match = 1;
  auto speculating = Harness(config);
  const Outcome got = speculating->Run(request);
  ExpectSameOutput(got, plain);
  EXPECT_GT(speculating->scheduler().stats().draft_tokens, 0u);
}

TEST_P(SpeculativeDecodingTest, ABatchMixesSpeculationDecodingAndPrefill) {
  // Requests arrive while others speculate: every step mixes verification passes, plain decode
  // rows and prefill chunks, and each request must still get its lone output.
  std::vector<Request> requests;
  std::vector<Outcome> plain;
  for (int i = 0; i < 5; ++i) {
    Request r = testing::GreedyWithLogprobs(Tokens(20 + 13 * i, 20 + i, vocab_), 18 + 3 * i);
    if (i == 3) {
      r.sampling.greedy = false;
      r.sampling.seed = 99;
      r.sampling.presence_penalty = 0.5f;
    }
    plain.push_back(Plainly(r));
    if (i % 2 == 0) r.prediction = plain.back().tokens;  // the others draft from themselves
    requests.push_back(std::move(r));
  }
  auto speculating = Harness(3);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < requests.size(); ++i) {
    streams.push_back(speculating->Add(requests[i]));
    for (int step = 0; step < 3; ++step) speculating->scheduler().Step();
  }
  speculating->RunUntilIdle();
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSameOutput(Drain(*streams[i]), plain[i]);
  }
  EXPECT_GT(speculating->scheduler().stats().accepted_draft_tokens, 0u);
}

// Choices of one prompt decode beside each other over its shared pages (exact Hydragen) while
// they draft from a prediction: a choice whose draft is verified runs a multi-token pass of
// plain attention, one without a draft a Hydragen row, step by step. Each must still be the
// lone, unspeculated request with its seed.
TEST_P(SpeculativeDecodingTest, ChoicesSpeculateBesideHydragenAndChangeNothing) {
  Request request = testing::GreedyWithLogprobs(Tokens(40, 14, vocab_), 20);
  request.prediction = Plainly(request).tokens;  // the greedy answer: often right when sampled
  request.sampling.greedy = false;
  request.sampling.temperature = 0.2f;
  request.sampling.seed = 31;
  constexpr int32_t kChoices = 4;
  auto speculating = Harness(3);
  std::vector<std::shared_ptr<RequestStream>> streams = speculating->AddChoices(request, kChoices);
  // Steps that verified a draft while Hydragen attended other choices' rows.
  int mixed_steps = 0;
  for (int step = 0; step < 1000 && !speculating->scheduler().idle(); ++step) {
    const SchedulerStats before = speculating->scheduler().stats();
    speculating->scheduler().Step();
    const SchedulerStats after = speculating->scheduler().stats();
    mixed_steps +=
        after.draft_tokens > before.draft_tokens && after.hydragen_nodes > before.hydragen_nodes;
  }
  ASSERT_TRUE(speculating->scheduler().idle());
  for (int32_t i = 0; i < kChoices; ++i) {
    SCOPED_TRACE(i);
    Request alone = request;
    alone.sampling.seed = ChoiceSeed(request.sampling.seed, i);
    ExpectSameOutput(Drain(*streams[i]), Plainly(alone));
  }
  EXPECT_GT(speculating->scheduler().stats().draft_tokens, 0u);
  if (model_->config().num_attention_layers > 0) {
    EXPECT_GT(mixed_steps, 0);
  }
}

TEST_P(SpeculativeDecodingTest, AStopInsideAnAcceptedDraftEndsThereAndCachesTheRightState) {
  const std::vector<int32_t> prompt = Tokens(45, 12, vocab_);
  const Outcome unstopped = Plainly(testing::GreedyWithLogprobs(prompt, 30));
  // Stop at the last token that is new to the output (a stop id must not have come earlier):
  // never the first token, which the prompt's pass samples, so inside some step's draft.
  size_t stop_at = 0;
  for (size_t i = 1; i < unstopped.tokens.size(); ++i) {
    const auto begin = unstopped.tokens.begin();
    if (std::find(begin, begin + i, unstopped.tokens[i]) == begin + i) stop_at = i;
  }
  ASSERT_GT(stop_at, 0u);
  Request request = testing::GreedyWithLogprobs(prompt, 30);
  request.stop_token_ids = {unstopped.tokens[stop_at]};
  const Outcome plain = Plainly(request);
  ASSERT_EQ(plain.tokens.size(), stop_at + 1);
  ASSERT_EQ(plain.finished.finish_reason, FinishReason::kStop);

  Request predicted = request;
  predicted.prediction = unstopped.tokens;  // goes on past the stop
  auto speculating = Harness(8);
  const Outcome got = speculating->Run(predicted);
  ExpectSameOutput(got, plain);

  // The cache holds the state of what was emitted, not of the draft's tail: the next turn, a
  // hit, gives the bits of a miss.
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), got.tokens.begin(), got.tokens.end());
  const std::vector<int32_t> user = Tokens(7, 13, vocab_);
  next.insert(next.end(), user.begin(), user.end());
  const Request second = testing::GreedyWithLogprobs(next, 12);
  const Outcome hit = speculating->Run(second);
  EXPECT_GT(hit.finished.usage.cached_tokens, static_cast<int64_t>(prompt.size()));
  ExpectSameOutput(hit, Plainly(second));
}

TEST_P(SpeculativeDecodingTest, RefusedDraftsBackOff) {
  // A prediction made so that every draft after the first is wrong: each pair of consecutive
  // output tokens appears in it, followed by four tokens the output never has. Without the
  // back-off every step would verify four refused tokens (about 150 here); with it, drafting
  // pauses for 2, 4, 8, ... tokens after each refusal.
  const Request request = testing::GreedyWithLogprobs(Tokens(25, 19, vocab_), 40);
  const Outcome plain = Plainly(request);
  int32_t absent = 0;
  while (std::find(plain.tokens.begin(), plain.tokens.end(), absent) != plain.tokens.end()) {
    ++absent;
  }
  Request predicted = request;
  for (size_t i = 1; i < plain.tokens.size(); ++i) {
    predicted.prediction.insert(predicted.prediction.end(), {plain.tokens[i - 1], plain.tokens[i],
                                                             absent, absent, absent, absent});
  }
  SchedulerConfig config = Speculating(4);
  config.speculation.prompt_lookup = false;
  auto speculating = Harness(config);
  const Outcome got = speculating->Run(predicted);
  ExpectSameOutput(got, plain);
  EXPECT_LE(got.finished.usage.rejected_draft_tokens, 32);
  EXPECT_GT(got.finished.usage.rejected_draft_tokens, 0);
}

TEST_P(SpeculativeDecodingTest, DraftsTakeOnlyTheBudgetOthersLeave) {
  // A step of 8 tokens, a sequence with a perfect prediction, and a prompt that arrives while it
  // decodes: the prompt gets the 7 tokens the decode row leaves each step, as without
  // speculation, and the draft gets nothing until the prompt is in.
  const Request first = testing::GreedyWithLogprobs(Tokens(20, 30, vocab_), 40);
  const Request second = testing::GreedyWithLogprobs(Tokens(30, 31, vocab_), 6);
  const Outcome first_plain = Plainly(first), second_plain = Plainly(second);
  SchedulerConfig config = Speculating(8);
  config.step_tokens = 8;
  auto speculating = Harness(config);
  Request predicted = first;
  predicted.prediction = first_plain.tokens;
  auto first_stream = speculating->Add(predicted);
  Scheduler& scheduler = speculating->scheduler();
  while (scheduler.status_of(1) != SequenceStatus::kDecoding) scheduler.Step();
  auto second_stream = speculating->Add(second);
  for (int step = 0; step < 5; ++step) scheduler.Step();  // 7 + 7 + 7 + 7 + 2 prompt tokens
  EXPECT_EQ(scheduler.status_of(2), SequenceStatus::kDecoding);
  EXPECT_EQ(scheduler.status_of(1), SequenceStatus::kDecoding);  // one token a step meanwhile
  speculating->RunUntilIdle();
  ExpectSameOutput(Drain(*first_stream), first_plain);
  ExpectSameOutput(Drain(*second_stream), second_plain);
  EXPECT_GT(scheduler.stats().accepted_draft_tokens, 0u);
}

TEST_P(SpeculativeDecodingTest, DraftsNeverRunPastTheLengthLimit) {
  const Request request = testing::GreedyWithLogprobs(Tokens(30, 14, vocab_), 7);
  const Outcome plain = Plainly(request);
  Request predicted = request;
  predicted.prediction = plain.tokens;
  predicted.prediction.resize(40, 1);  // a prediction longer than the limit
  auto speculating = Harness(16);
  const Outcome got = speculating->Run(predicted);
  ExpectSameOutput(got, plain);
  // After the prompt's token, one step: five drafted tokens and the row after them.
  EXPECT_EQ(got.finished.usage.accepted_draft_tokens, 5);
  EXPECT_EQ(got.finished.usage.rejected_draft_tokens, 0);
}

TEST_P(SpeculativeDecodingTest, ScarceMemoryShortensDraftsWithoutChangingOutput) {
  const Request request = testing::GreedyWithLogprobs(Tokens(50, 15, vocab_), 24);
  const Outcome plain = Plainly(request);
  Request predicted = request;
  predicted.prediction = plain.tokens;
  // Room for the sequence's SSM block, its KV pages twice over (AVMP splits the budget between
  // the pools) and about two more blocks, with no cache: the drafts get what is free.
  const models::StateLayout& layout = model_->layout();
  const size_t kv = static_cast<size_t>(layout.PagesFor(80)) * layout.kv_page_bytes();
  const size_t block = model_->config().num_ssm_layers > 0 ? layout.ssm_block_bytes() : 0;
  const size_t memory = 2 * kv + 3 * block + layout.kv_page_bytes();
  auto speculating = Harness(8, memory, CachePolicy::kNone);
  const Outcome got = speculating->Run(predicted);
  ExpectSameOutput(got, plain);
  EXPECT_GT(got.finished.usage.accepted_draft_tokens, 0);
  // Drafts took free units only: the allocator saw the out-of-memory events and capacity moves
  // of plain decoding in the same memory, and got every unit back (with no cache, nothing is
  // held once the request is done).
  auto alone = Harness(0, memory, CachePolicy::kNone);
  const Outcome alone_out = alone->Run(request);
  ExpectSameOutput(alone_out, plain);
  EXPECT_TRUE(alone_out.finished.error.ok()) << alone_out.finished.error;
  for (const cache::Pool pool : {cache::Pool::kKvPage, cache::Pool::kSsmBlock}) {
    EXPECT_EQ(speculating->allocator().stats(pool).oom_events,
              alone->allocator().stats(pool).oom_events);
    EXPECT_EQ(speculating->used(pool), 0u);
  }
  EXPECT_EQ(speculating->allocator().allocator_stats().migrations,
            alone->allocator().allocator_stats().migrations);
}

INSTANTIATE_TEST_SUITE_P(Families, SpeculativeDecodingTest,
                         ::testing::ValuesIn(::tandem::testing::kFamilyFixtures),
                         testing::FixtureTestName);

// What speculation rests on: a verification pass's rows (all_logits) are the bits of the decode
// steps that would have run those tokens one by one, on the batch-invariant CPU backend.
TEST(ModelRunnerRowsTest, AllRowsOfAPassAreTheBitsOfDecodeSteps) {
  for (const std::string& family : ::tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(family);
    auto model = LoadFixtureModel(family);
    ASSERT_NE(model, nullptr);
    const int32_t vocab = model->config().vocab_size;
    auto make = [&] {
      return std::make_unique<ModelRunner>(*model, kernels::MakeCpuOps(2, true),
                                           testing::SharingEveryPage());
    };
    const std::vector<int32_t> prompt = Tokens(21, 16, vocab);
    const std::vector<int32_t> next = Tokens(5, 17, vocab);
    cache::AllocatorOptions options;
    auto spec = CacheModelSpecFor(model->config(), "fixture");
    ASSERT_TRUE(spec.ok());
    options.budget_bytes = 16 * kMiB;
    options.page_tokens = 16;
    options.backing = cache::BackingKind::kHost;
    auto allocator = cache::CreateAllocator("avmp-dynamic", *spec, options);
    ASSERT_TRUE(allocator.ok());
    std::vector<std::vector<float>> rows(2);
    for (int mode = 0; mode < 2; ++mode) {
      auto runner = make();
      auto memory = SequenceMemory::Create(*allocator->allocator, *model);
      ASSERT_TRUE(memory.ok());
      ASSERT_TRUE(memory->Reserve(40).ok());
      std::vector<absl::Status> errors;
      const models::SequenceInput first{&memory->state(), prompt, {}, false};
      ASSERT_TRUE(runner->Run({&first, 1}, &errors).ok());
      // A second sequence beside it, so the rows' places in the pass differ between modes.
      auto other = SequenceMemory::Create(*allocator->allocator, *model);
      ASSERT_TRUE(other.ok());
      ASSERT_TRUE(other->Reserve(40).ok());
      const std::vector<int32_t> other_tokens = Tokens(9, 18, vocab);
      if (mode == 0) {
        for (size_t t = 0; t < next.size(); ++t) {
          const models::SequenceInput step{
              &memory->state(), std::span(next).subspan(t, 1), {}, false};
          ASSERT_TRUE(runner->Run({&step, 1}, &errors).ok());
          rows[0].insert(rows[0].end(), runner->logits_row(0), runner->logits_row(0) + vocab);
        }
      } else {
        const std::vector<models::SequenceInput> batch = {
            {&other->state(), other_tokens, {}, false}, {&memory->state(), next, {}, true}};
        const std::vector<LogitsUse> uses = {LogitsUse::kArgmax, LogitsUse::kRow};
        ASSERT_TRUE(runner->Run(batch, &errors, uses).ok());
        ASSERT_EQ(runner->rows(0), 1u);
        ASSERT_EQ(runner->rows(1), next.size());
        for (size_t t = 0; t < next.size(); ++t) {
          rows[1].insert(rows[1].end(), runner->logits_row(1, t), runner->logits_row(1, t) + vocab);
        }
        // Sampling rules come one per row: one per sequence is refused before anything runs.
        const std::vector<LogitsUse> sampled = {LogitsUse::kArgmax, LogitsUse::kSample};
        const std::vector<kernels::SamplingRow> per_sequence(2);
        EXPECT_TRUE(
            absl::IsInvalidArgument(runner->Run(batch, &errors, sampled, {per_sequence, {}})));
      }
    }
    EXPECT_EQ(rows[0], rows[1]);
  }
}

}  // namespace
}  // namespace tandem::engine
