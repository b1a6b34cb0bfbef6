// Structured output through the scheduler, on the bundled model (a real tokenizer and a trained
// model): every answer is JSON that satisfies the request's schema, greedy or sampled, a cache
// hit gives the same answer as a miss, and requests without a constraint are untouched beside
// constrained ones.
#include <memory>
#include <string>
#include <vector>

#include "engine/json_schema_grammar.h"
#include "gtest/gtest.h"
#include "models/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::Outcome;
using testing::SchedulerHarness;

std::string BundledModel() { return std::string(TANDEM_TEST_DATA) + "/../../bundled/tandem-tiny-chat"; }

constexpr const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "mood": {"enum": ["cheerful", "grave", "vexed"]},
    "married": {"type": "boolean"},
    "daughters": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}
  },
  "required": ["name", "mood", "married"]
})";

class StructuredOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models::LoadOptions options;
    options.page_tokens = 16;
    auto model = models::Model::Load(BundledModel(), options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    auto tokenizer = models::LoadTokenizer(BundledModel());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    auto grammar = JsonSchemaGrammar(kPersonSchema);
    ASSERT_TRUE(grammar.ok()) << grammar.status();
    person_ = std::make_shared<const Grammar>(*std::move(grammar));
  }

  std::unique_ptr<SchedulerHarness> Harness(CachePolicy policy = CachePolicy::kNone) {
    return std::make_unique<SchedulerHarness>(*model_, policy, 64 << 20, SchedulerConfig{},
                                              testing::Backend::kCpu, "avmp-dynamic",
                                              models::HydragenConfig{}, tokenizer_.get());
  }

  Request Ask(std::string_view prompt, std::shared_ptr<const Grammar> grammar) {
    Request r;
    auto ids = tokenizer_->Encode(prompt, true);
    EXPECT_TRUE(ids.ok());
    r.prompt = *ids;
    r.max_new_tokens = 160;
    r.grammar = std::move(grammar);
    return r;
  }

  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Tokenizer> tokenizer_;
  std::shared_ptr<const Grammar> person_;
};

// The text of a finished constrained request, which must have ended on its own.
nlohmann::json ParsedAnswer(const Outcome& out) {
  EXPECT_TRUE(out.finished.error.ok()) << out.finished.error;
  EXPECT_EQ(out.finished.finish_reason, FinishReason::kStop) << out.text;
  try {
    return nlohmann::json::parse(out.text);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "not JSON: " << out.text << " (" << e.what() << ")";
    return nullptr;
  }
}

void ExpectPerson(const nlohmann::json& v) {
  ASSERT_TRUE(v.is_object()) << v.dump();
  ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << v.dump();
  ASSERT_TRUE(v.contains("mood")) << v.dump();
  EXPECT_TRUE(v["mood"] == "cheerful" || v["mood"] == "grave" || v["mood"] == "vexed") << v.dump();
  ASSERT_TRUE(v.contains("married") && v["married"].is_boolean()) << v.dump();
  if (v.contains("daughters")) {
    ASSERT_TRUE(v["daughters"].is_array());
    EXPECT_LE(v["daughters"].size(), 3u);
  }
  for (const auto& [key, unused] : v.items()) {
    EXPECT_TRUE(key == "name" || key == "mood" || key == "married" || key == "daughters") << key;
  }
}

TEST_F(StructuredOutputTest, GreedyAndSampledAnswersSatisfyTheSchema) {
  auto harness = Harness();
  const Outcome free = harness->Run(Ask("Mrs. Bennet said to her husband", nullptr));
  // (A cast to void does not quiet GCC's warn_unused_result, which parse carries.)
  EXPECT_THROW(const nlohmann::json parsed = nlohmann::json::parse(free.text),
               nlohmann::json::exception)
      << "the unconstrained model already writes JSON: " << free.text;

  const Outcome greedy = harness->Run(Ask("Mrs. Bennet said to her husband", person_));
  ExpectPerson(ParsedAnswer(greedy));
  for (uint64_t seed : {1, 2, 3, 4}) {
    Request r = Ask("Elizabeth", person_);
    r.sampling.greedy = false;
    r.sampling.temperature = 1.0f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = seed;
    r.sampling.repetition_penalty = 1.1f;
    const Outcome sampled = harness->Run(r);
    SCOPED_TRACE(sampled.text);
    ExpectPerson(ParsedAnswer(sampled));
  }
}

// Any JSON object; the model must still end it, and the logprobs are the raw model's.
TEST_F(StructuredOutputTest, JsonObjectModeWithLogprobs) {
  auto harness = Harness();
  Request r = Ask("Mr. Darcy", std::make_shared<const Grammar>(JsonObjectGrammar()));
  r.max_new_tokens = 400;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 3;
  const Outcome out = harness->Run(r);
  if (out.finished.finish_reason == FinishReason::kStop) {
    EXPECT_TRUE(ParsedAnswer(out).is_object()) << out.text;
  } else {
    EXPECT_EQ(out.finished.finish_reason, FinishReason::kLength);  // ran out inside the object
    EXPECT_EQ(out.text.substr(out.text.find_first_not_of(" \n\t"), 1), "{") << out.text;
  }
  ASSERT_EQ(out.logprobs.size(), out.tokens.size());
  for (const auto& lp : out.logprobs) {
    ASSERT_EQ(lp.size(), 4u);
    EXPECT_LE(lp[0].logprob, 0.0f);
    EXPECT_GE(lp[1].logprob, lp[0].logprob);  // the most likely raw token, allowed or not
  }
}

// Speculative decoding under a constraint: a prediction (right, or right only in part) leaves
// every constrained answer as it was, greedy or sampled, and the state the answer leaves in the
// cache (its last rows read inside a draft) serves the next turn as a miss would.
TEST_F(StructuredOutputTest, APredictionChangesNoConstrainedAnswer) {
  auto harness = Harness(CachePolicy::kMarconi);
  for (uint64_t seed : {0, 7}) {
    SCOPED_TRACE(seed);
    Request r = Ask("Mrs. Bennet said to her husband", person_);
    if (seed != 0) {
      r.sampling.greedy = false;
      r.sampling.seed = seed;
      r.sampling.presence_penalty = 0.4f;
    }
    const Outcome plain = Harness()->Run(r);
    ExpectPerson(ParsedAnswer(plain));
    for (const bool whole : {true, false}) {
      Request predicted = r;
      predicted.prediction = plain.tokens;
      if (!whole) predicted.prediction.resize(plain.tokens.size() / 2);
      const Outcome got = harness->Run(predicted);
      EXPECT_EQ(got.tokens, plain.tokens);
      EXPECT_EQ(got.text, plain.text);
      EXPECT_GT(got.finished.usage.accepted_draft_tokens, 0);
    }
    // The next turn starts with this one's prompt and answer: restored from the cache, it
    // answers as a cold run does.
    Request next = Ask("", nullptr);
    next.prompt = r.prompt;
    next.prompt.insert(next.prompt.end(), plain.tokens.begin(), plain.tokens.end());
    const std::vector<int32_t> more = *tokenizer_->Encode(" Then she said", false);
    next.prompt.insert(next.prompt.end(), more.begin(), more.end());
    next.max_new_tokens = 12;
    const Outcome hit = harness->Run(next);
    EXPECT_GT(hit.finished.usage.cached_tokens, static_cast<int64_t>(r.prompt.size()));
    EXPECT_EQ(hit.tokens, Harness()->Run(next).tokens);
  }
}

TEST_F(StructuredOutputTest, CacheHitGivesTheSameAnswerAsAMiss) {
  auto harness = Harness(CachePolicy::kMarconi);
  // A prompt of several pages with a checkpoint hinted a few tokens before its end (a request
  // must still run its last token itself), so that the second request restores the first's
  // state there.
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "It is a truth universally acknowledged, that a single man. ";
  Request first = Ask(prompt, person_);
  first.checkpoint_hints = {first.prompt.size() - 3};
  const Request second = first;
  const Outcome miss = harness->Run(first);
  const Outcome hit = harness->Run(second);
  EXPECT_EQ(hit.finished.usage.cached_tokens, static_cast<int64_t>(first.prompt.size() - 3));
  EXPECT_EQ(hit.tokens, miss.tokens);
  EXPECT_EQ(hit.text, miss.text);
  ExpectPerson(ParsedAnswer(hit));
}

TEST_F(StructuredOutputTest, ConstrainedAndFreeRequestsShareABatch) {
  auto harness = Harness();
  const Outcome free_alone = harness->Run(Ask("Jane wrote to her sister", nullptr));
  const Outcome person_alone = harness->Run(Ask("Mr. Collins", person_));
  auto free_stream = harness->Add(Ask("Jane wrote to her sister", nullptr));
  auto person_stream = harness->Add(Ask("Mr. Collins", person_));
  harness->RunUntilIdle();
  EXPECT_EQ(testing::Drain(*free_stream).tokens, free_alone.tokens);
  EXPECT_EQ(testing::Drain(*person_stream).tokens, person_alone.tokens);
}

// A text that is whole with nothing to follow ends the request even when it ignores EOS.
TEST_F(StructuredOutputTest, AWholeTextEndsTheRequestEvenIgnoringEos) {
  auto harness = Harness();
  auto grammar = JsonSchemaGrammar(R"({"enum": ["yes", "no"]})");
  ASSERT_TRUE(grammar.ok());
  Request r = Ask("Will you dance?", std::make_shared<const Grammar>(*std::move(grammar)));
  r.ignore_eos = true;
  const Outcome out = harness->Run(r);
  EXPECT_EQ(out.finished.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(out.text == "\"yes\"" || out.text == "\"no\"" || out.text == " \"yes\"" ||
              out.text == " \"no\"")
      << out.text;
}

TEST_F(StructuredOutputTest, NeedsATokenizer) {
  SchedulerHarness no_text(*model_, CachePolicy::kNone, 64 << 20);
  Request r = Ask("Hello", person_);
  const absl::Status s = no_text.scheduler().Validate(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no tokenizer"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::engine
