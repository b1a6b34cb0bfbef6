// engine::CompareModels: two models scored in lockstep give each its own perplexity, bit for bit
// what MeasurePerplexity gives it alone; a model against itself diverges by exactly nothing; the
// divergence and top-token arithmetic on rows worked by hand; mismatched vocabularies refused.
#include "engine/model_comparison.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cache/arena_allocator.h"
#include "engine/sequence_memory.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::Backend;
using testing::Tokens;

std::unique_ptr<models::Model> Load(const std::string& name, models::WeightStorage storage) {
  models::LoadOptions options;
  options.weight_storage = storage;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  auto model = models::Model::Load(testing::Fixture("models/" + name), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// A model with its backend and the memory for `batch` windows of `context` positions.
struct Scorer {
  Scorer(std::unique_ptr<models::Model> loaded, int32_t batch, int64_t context)
      : model(std::move(loaded)), ops(testing::MakeOps(Backend::kCpu)) {
    auto arena = cache::ArenaAllocator::Create(ArenaForSequences(*model, batch, context));
    EXPECT_TRUE(arena.ok()) << arena.status();
    allocator = *std::move(arena);
  }
  ScoringModel scoring() { return {model.get(), ops.get(), allocator.get(), ""}; }
  std::unique_ptr<models::Model> model;
  std::unique_ptr<kernels::Ops> ops;
  std::unique_ptr<cache::ArenaAllocator> allocator;
};

PerplexityOptions Windows() {
  PerplexityOptions options;
  options.context = 24;  // score_from 12
  options.prefix = {1};
  options.batch = 2;
  options.chunk = 7;
  return options;
}

TEST(ModelComparisonTest, AModelAgainstItselfDivergesByNothing) {
  Scorer a(Load("jamba-tiny", models::WeightStorage::kAuto), 2, 24);
  Scorer b(Load("jamba-tiny", models::WeightStorage::kAuto), 2, 24);
  const std::vector<int32_t> text = Tokens(80, 3, a.model->config().vocab_size);
  auto got = CompareModels(a.scoring(), b.scoring(), text, Windows());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->divergences.size(), static_cast<size_t>(got->reference.scored_tokens));
  for (float d : got->divergences) EXPECT_EQ(d, 0.0f);
  EXPECT_EQ(got->same_top_token, got->reference.scored_tokens);
  EXPECT_EQ(got->same_top_token_rate(), 1.0);
  EXPECT_EQ(got->reference.nll_sum, got->compared.nll_sum);
}

TEST(ModelComparisonTest, EachModelGetsItsOwnPerplexityBitForBit) {
  for (const char* name : {"zamba2-tiny", "mamba2-tiny"}) {
    SCOPED_TRACE(name);
    Scorer reference(Load(name, models::WeightStorage::kF32), 2, 24);
    Scorer int8(Load(name, models::WeightStorage::kInt8), 2, 24);
    const std::vector<int32_t> text = Tokens(90, 4, reference.model->config().vocab_size);
    auto got = CompareModels(reference.scoring(), int8.scoring(), text, Windows());
    ASSERT_TRUE(got.ok()) << got.status();
    // What each gives alone, with batch 1 and whole passes.
    PerplexityOptions alone = Windows();
    alone.batch = 1;
    alone.chunk = 512;
    for (Scorer* scorer : {&reference, &int8}) {
      auto measured =
          MeasurePerplexity(*scorer->model, *scorer->ops, *scorer->allocator, text, alone);
      ASSERT_TRUE(measured.ok()) << measured.status();
      const PerplexityResult& side = scorer == &reference ? got->reference : got->compared;
      EXPECT_EQ(side.nll_sum, measured->nll_sum);
      EXPECT_EQ(side.scored_tokens, measured->scored_tokens);
      EXPECT_EQ(side.tokens_run, measured->tokens_run);
    }
    // int8 weights move the distributions a little, everywhere.
    EXPECT_GT(got->mean_divergence(), 0);
    EXPECT_LT(got->mean_divergence(), 0.5);
    EXPECT_GT(got->mean_divergence_stderr(), 0);
    EXPECT_LE(got->divergence_quantile(0.5), got->divergence_quantile(0.99));
    EXPECT_LE(got->divergence_quantile(0.99), got->divergence_quantile(1.0));
    double sum = 0;
    for (float d : got->divergences) {
      EXPECT_GE(d, 0.0f);
      sum += d;
    }
    EXPECT_NEAR(sum, got->divergence_sum, 1e-6 * (1 + sum));
  }
}

// The divergences come in window and position order and add up the same whatever the batch and
// the pass size.
TEST(ModelComparisonTest, BatchAndPassSizeChangeNothing) {
  Scorer reference(Load("jamba-tiny", models::WeightStorage::kF32), 3, 24);
  Scorer bf16(Load("jamba-tiny", models::WeightStorage::kBF16), 3, 24);
  const std::vector<int32_t> text = Tokens(120, 6, reference.model->config().vocab_size);
  PerplexityOptions alone = Windows();
  alone.batch = 1;
  alone.chunk = 512;
  PerplexityOptions batched = Windows();
  batched.batch = 3;
  batched.chunk = 5;
  auto a = CompareModels(reference.scoring(), bf16.scoring(), text, alone);
  auto b = CompareModels(reference.scoring(), bf16.scoring(), text, batched);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->divergences, b->divergences);
  EXPECT_EQ(a->divergence_sum, b->divergence_sum);
  EXPECT_EQ(a->divergence_square_sum, b->divergence_square_sum);
  EXPECT_EQ(a->same_top_token, b->same_top_token);
  EXPECT_EQ(a->compared.nll_sum, b->compared.nll_sum);
}

// A model's failure is named, so that a comparison says which of the two it was.
TEST(ModelComparisonTest, ErrorsNameTheModel) {
  Scorer reference(Load("jamba-tiny", models::WeightStorage::kF32), 2, 24);
  Scorer small(Load("jamba-tiny", models::WeightStorage::kInt8), 1, 24);  // one window's memory
  const std::vector<int32_t> text = Tokens(80, 7, reference.model->config().vocab_size);
  ScoringModel compared = small.scoring();
  compared.name = "int8 weights";
  auto got = CompareModels(reference.scoring(), compared, text, Windows());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
  EXPECT_EQ(got.status().message().rfind("int8 weights: ", 0), 0u) << got.status();
}

TEST(ModelComparisonTest, DivergenceAndTopTokenOnRowsWorkedByHand) {
  // P = softmax(0, ln 3) = (1/4, 3/4); Q = softmax(0, 0) = (1/2, 1/2).
  const std::vector<float> p = {0.0f, std::log(3.0f)};
  const std::vector<float> q = {5.0f, 5.0f};  // shifted: only differences matter
  const double expected = 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5);
  EXPECT_NEAR(KlDivergence(p, q), expected, 1e-7);
  EXPECT_EQ(KlDivergence(p, p), 0.0);
  // A token P cannot produce (a logit of -inf) adds nothing.
  const std::vector<float> p3 = {0.0f, -INFINITY, 0.0f};
  const std::vector<float> q3 = {0.0f, 0.0f, 0.0f};
  EXPECT_NEAR(KlDivergence(p3, q3), std::log(1.5), 1e-7);
  EXPECT_EQ(TopToken(std::vector<float>{1, 3, 3, 2}), 1);  // the lowest id on a tie
  // Q without a token P can produce: infinitely far. Broken logits stay broken.
  EXPECT_EQ(KlDivergence(q3, p3), INFINITY);
  EXPECT_TRUE(std::isnan(KlDivergence(std::vector<float>{0.0f, NAN}, q)));
}

TEST(ModelComparisonTest, QuantilesOfTheDivergences) {
  ModelComparison c;
  EXPECT_EQ(c.divergence_quantile(0.5), 0);
  EXPECT_EQ(c.mean_divergence(), 0);
  c.divergences = {0.4f, 0.1f, 0.3f, 0.2f, 0.5f};
  EXPECT_FLOAT_EQ(c.divergence_quantile(0), 0.1f);
  EXPECT_FLOAT_EQ(c.divergence_quantile(0.5), 0.3f);
  EXPECT_FLOAT_EQ(c.divergence_quantile(1), 0.5f);
  c.same_top_token = 4;
  EXPECT_DOUBLE_EQ(c.same_top_token_rate(), 0.8);
}

TEST(ModelComparisonTest, VocabulariesMustMatch) {
  Scorer jamba(Load("jamba-tiny", models::WeightStorage::kAuto), 1, 24);
  // The same architecture with twice the vocabulary, random weights.
  models::ModelConfig wider = jamba.model->config();
  wider.vocab_size *= 2;
  auto random = models::Model::CreateRandom(wider, 7);
  ASSERT_TRUE(random.ok()) << random.status();
  Scorer other(*std::move(random), 1, 24);
  const std::vector<int32_t> text = Tokens(40, 5, 100);
  auto got = CompareModels(jamba.scoring(), other.scoring(), text, Windows());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("the models' vocabularies differ"), std::string::npos)
      << got.status();
}

}  // namespace
}  // namespace tandem::engine
