// The state contract (docs/ARCHITECTURE.md, "Exactness contracts"), for every family: a sequence's
// logits do not depend on how its tokens were split into calls, on the KV page size, or on whether
// it was restored from a checkpoint taken at any position. The oracle is always one full prefill.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "model_test_util.h"
#include "models/model.h"

namespace tandem::testing {
namespace {

// The reference backend sums in an order that does not depend on how tokens are split into
// calls, so it must agree to rounding of the last bits. The CPU backend in batch-invariant mode
// (what the engine runs) computes every token with the same instructions however the tokens are
// split, batched or restored: bit-equal. In its fast mode the GEMM kernel and the SSD chunk
// alignment follow the call's shape, which moves logits of magnitude ~10 by up to ~1.5e-4 on
// these random checkpoints (fp32 rounding, ~1e-5 relative); greedy tokens are unaffected.
float ToleranceFor(const std::string& backend) {
  if (backend == "reference") return 2e-5f;
  return backend == "cpu_invariant" ? 0.0f : 3e-4f;
}

// The fast attention runs its online softmax page by page, so the page size moves rounding
// whatever the mode.
constexpr float kPageSizeTolerance = 3e-4f;

std::vector<int32_t> Prompt(int n, int seed) {
  std::vector<int32_t> ids;
  uint32_t x = 2654435761u * (seed + 1);
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    ids.push_back(4 + static_cast<int32_t>((x >> 8) % 1000));
  }
  return ids;
}

struct ExactnessCase {
  std::string model;
  std::string backend;
};

class StateExactnessTest : public ::testing::TestWithParam<ExactnessCase> {
 protected:
  void SetUp() override {
    auto model = models::Model::Load(ModelDir(GetParam().model), ParityOptions());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    const std::string& backend = GetParam().backend;
    ops_ = backend == "reference" ? kernels::MakeReferenceOps()
                                  : kernels::MakeCpuOps(0, backend == "cpu_invariant");
    kTolerance = ToleranceFor(GetParam().backend);
    vocab_ = model_->config().vocab_size;
  }

  // Logits rows [from, n) of one full prefill of `prompt`.
  std::vector<float> FullPrefillRows(const std::vector<int32_t>& prompt, size_t from) {
    TestSequence seq(*model_);
    std::vector<float> all = RunTokens(*model_, *ops_, ws_, seq, prompt, true);
    return std::vector<float>(all.begin() + from * vocab_, all.end());
  }

  std::unique_ptr<models::Model> model_;
  std::unique_ptr<kernels::Ops> ops_;
  kernels::Workspace ws_;
  int64_t vocab_ = 0;
  float kTolerance = 0;
};

// 100 tokens cross three SSD chunk boundaries (chunk_size 32 in the Mamba-2 fixtures).
constexpr int kPromptLength = 100;

TEST_P(StateExactnessTest, SplitPrefillEqualsFullPrefill) {
  const std::vector<int32_t> prompt = Prompt(kPromptLength, 1);
  const std::vector<float> full = FullPrefillRows(prompt, 0);
  for (int p : {1, 3, 31, 32, 33, 50, 64, 99}) {
    SCOPED_TRACE("split at " + std::to_string(p));
    TestSequence seq(*model_);
    const std::span<const int32_t> all(prompt);
    std::vector<float> got = RunTokens(*model_, *ops_, ws_, seq, all.first(p), true);
    std::vector<float> rest = RunTokens(*model_, *ops_, ws_, seq, all.subspan(p), true);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_LE(MaxAbsDiff(got, full), kTolerance);
  }
}

TEST_P(StateExactnessTest, PrefillThenDecodeStepsEqualsFullPrefill) {
  const std::vector<int32_t> prompt = Prompt(kPromptLength, 2);
  const std::vector<float> full = FullPrefillRows(prompt, 0);
  for (int p : {1, 30, 64}) {
    SCOPED_TRACE("prefill " + std::to_string(p) + " then decode");
    TestSequence seq(*model_);
    const std::span<const int32_t> all(prompt);
    std::vector<float> got = RunTokens(*model_, *ops_, ws_, seq, all.first(p), true);
    for (int t = p; t < kPromptLength; ++t) {
      std::vector<float> row = RunTokens(*model_, *ops_, ws_, seq, all.subspan(t, 1), false);
      got.insert(got.end(), row.begin(), row.end());
    }
    EXPECT_LE(MaxAbsDiff(got, full), kTolerance);
  }
}

TEST_P(StateExactnessTest, RestoreFromCheckpointEqualsFullPrefill) {
  const std::vector<int32_t> prompt = Prompt(kPromptLength, 3);
  const std::vector<int> positions = {0, 1, 5, 31, 32, 33, 63, 64, 65, 99, 100};
  // One prefill takes every checkpoint at once, split across two calls so that checkpoints
  // are also taken in a continued prefill.
  TestSequence source(*model_);
  const int64_t block = model_->layout().ssm_block_floats();
  std::vector<std::vector<float>> blocks(positions.size(), std::vector<float>(block, -1.0f));
  const int first_call = 40;
  std::vector<models::SsmSnapshot> first, second;
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] <= first_call) {
      first.push_back({positions[i], blocks[i].data()});
    } else {
      second.push_back({positions[i] - first_call, blocks[i].data()});
    }
  }
  const std::span<const int32_t> all(prompt);
  RunTokens(*model_, *ops_, ws_, source, all.first(first_call), false, first);
  RunTokens(*model_, *ops_, ws_, source, all.subspan(first_call), false, second);

  for (size_t i = 0; i < positions.size(); ++i) {
    const int p = positions[i];
    if (p == kPromptLength) continue;  // nothing left to run; covered by the decode test below
    SCOPED_TRACE("restore at " + std::to_string(p));
    TestSequence restored(*model_);
    std::copy(blocks[i].begin(), blocks[i].end(), restored.state().ssm);
    // KV of positions [0, p): copy the source's pages.
    restored.Reserve(p);
    for (size_t page = 0; page < restored.state().kv_pages.size(); ++page) {
      std::copy(source.state().kv_pages[page],
                source.state().kv_pages[page] + model_->layout().kv_page_floats(),
                restored.state().kv_pages[page]);
    }
    restored.state().tokens = p;
    std::vector<float> got = RunTokens(*model_, *ops_, ws_, restored, all.subspan(p), true);
    EXPECT_LE(MaxAbsDiff(got, FullPrefillRows(prompt, p)), kTolerance);
  }

  // The checkpoint after the last token equals the live state of the source sequence.
  EXPECT_LE(
      MaxAbsDiff(blocks.back(), std::vector<float>(source.state().ssm, source.state().ssm + block)),
      0.0f);
}

TEST_P(StateExactnessTest, PageSizesGiveEqualResults) {
  const std::vector<int32_t> prompt = Prompt(70, 4);
  std::vector<std::vector<float>> results;
  for (int32_t page : {1, 16, 64}) {
    auto model = models::Model::Load(ModelDir(GetParam().model), ParityOptions(page));
    ASSERT_TRUE(model.ok()) << model.status();
    TestSequence seq(**model);
    const std::span<const int32_t> all(prompt);
    std::vector<float> got = RunTokens(**model, *ops_, ws_, seq, all.first(50), true);
    for (int t = 50; t < 70; ++t) {
      std::vector<float> row = RunTokens(**model, *ops_, ws_, seq, all.subspan(t, 1), false);
      got.insert(got.end(), row.begin(), row.end());
    }
    results.push_back(std::move(got));
  }
  // The reference attention visits keys in position order whatever the page size: bit-equal.
  // The fast one runs its online softmax page by page, so only rounding may differ.
  const float bound = GetParam().backend == "reference" ? 0.0f : kPageSizeTolerance;
  EXPECT_LE(MaxAbsDiff(results[0], results[1]), bound);
  EXPECT_LE(MaxAbsDiff(results[1], results[2]), bound);
}

TEST_P(StateExactnessTest, BatchedSequencesEqualSeparateRuns) {
  // Two sequences in one Forward (one prefill chunk beside one decode token) give the same
  // logits as each run alone.
  const std::vector<int32_t> a = Prompt(45, 5), b = Prompt(20, 6);
  TestSequence alone_a(*model_), alone_b(*model_);
  std::vector<float> ref_a = RunTokens(*model_, *ops_, ws_, alone_a, a, true);
  const std::span<const int32_t> bs(b);
  RunTokens(*model_, *ops_, ws_, alone_b, bs.first(19), false);
  std::vector<float> ref_b = RunTokens(*model_, *ops_, ws_, alone_b, bs.subspan(19), false);

  TestSequence seq_a(*model_), seq_b(*model_);
  RunTokens(*model_, *ops_, ws_, seq_b, bs.first(19), false);
  seq_a.Reserve(45);
  seq_b.Reserve(20);
  const models::SequenceInput batch[2] = {{&seq_a.state(), a, {}, true},
                                          {&seq_b.state(), bs.subspan(19), {}, false}};
  std::vector<float> logits(46 * vocab_);
  ASSERT_TRUE(model_->Forward(*ops_, ws_, batch, logits.data()).ok());
  EXPECT_LE(MaxAbsDiff(std::span<const float>(logits).first(45 * vocab_), ref_a), kTolerance);
  EXPECT_LE(MaxAbsDiff(std::span<const float>(logits).subspan(45 * vocab_), ref_b), kTolerance);
}

TEST_P(StateExactnessTest, ManyPrefillsWithCheckpointsInOnePassEqualSeparateRuns) {
  // One pass of four sequences: a fresh prefill and a continued one, each taking checkpoints
  // (the varlen call's flat snapshot table), between two decode tokens. Every logits row, final
  // state and checkpoint equals that sequence's run alone.
  struct Case {
    std::vector<int32_t> tokens;
    int before;  // tokens run before the pass
    std::vector<int64_t> checkpoints_after;
  };
  const std::vector<Case> cases = {{Prompt(2, 7), 1, {}},
                                   {Prompt(37, 8), 0, {0, 5, 37}},
                                   {Prompt(30, 9), 29, {}},
                                   {Prompt(50, 10), 12, {1, 33}}};
  const int64_t block = model_->layout().ssm_block_floats();
  auto checkpoints_for = [&](const Case& c, std::vector<std::vector<float>>* blocks) {
    std::vector<models::SsmSnapshot> snaps;
    blocks->assign(c.checkpoints_after.size(), std::vector<float>(block, -1.0f));
    for (size_t i = 0; i < c.checkpoints_after.size(); ++i) {
      snaps.push_back({c.checkpoints_after[i], (*blocks)[i].data()});
    }
    return snaps;
  };

  std::vector<std::vector<float>> alone_logits;
  std::vector<std::vector<std::vector<float>>> alone_blocks(cases.size());
  std::vector<std::unique_ptr<TestSequence>> alone, batched;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::span<const int32_t> all(c.tokens);
    alone.push_back(std::make_unique<TestSequence>(*model_));
    batched.push_back(std::make_unique<TestSequence>(*model_));
    if (c.before > 0) {
      RunTokens(*model_, *ops_, ws_, *alone[i], all.first(c.before), false);
      RunTokens(*model_, *ops_, ws_, *batched[i], all.first(c.before), false);
    }
    const std::vector<models::SsmSnapshot> snaps = checkpoints_for(c, &alone_blocks[i]);
    alone_logits.push_back(
        RunTokens(*model_, *ops_, ws_, *alone[i], all.subspan(c.before), true, snaps));
  }

  std::vector<std::vector<std::vector<float>>> batched_blocks(cases.size());
  std::vector<std::vector<models::SsmSnapshot>> batched_snaps;
  std::vector<models::SequenceInput> batch;
  int64_t rows = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    batched_snaps.push_back(checkpoints_for(c, &batched_blocks[i]));
    batched[i]->Reserve(static_cast<int64_t>(c.tokens.size()));
    const std::span<const int32_t> rest = std::span<const int32_t>(c.tokens).subspan(c.before);
    batch.push_back({&batched[i]->state(), rest, batched_snaps.back(), true});
    rows += static_cast<int64_t>(rest.size());
  }
  std::vector<float> logits(rows * vocab_);
  ASSERT_TRUE(model_->Forward(*ops_, ws_, batch, logits.data()).ok());

  int64_t row = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    const int64_t n = static_cast<int64_t>(alone_logits[i].size());
    EXPECT_LE(MaxAbsDiff(std::span<const float>(logits).subspan(row, n), alone_logits[i]),
              kTolerance);
    row += n;
    if (block > 0) {
      EXPECT_LE(MaxAbsDiff(std::vector<float>(batched[i]->state().ssm,
                                              batched[i]->state().ssm + block),
                           std::vector<float>(alone[i]->state().ssm,
                                              alone[i]->state().ssm + block)),
                kTolerance);
    }
    for (size_t k = 0; k < batched_blocks[i].size(); ++k) {
      EXPECT_LE(MaxAbsDiff(batched_blocks[i][k], alone_blocks[i][k]), kTolerance);
      EXPECT_NE(batched_blocks[i][k], std::vector<float>(block, -1.0f)) << "checkpoint " << k;
    }
  }
}

TEST_P(StateExactnessTest, BadTokensAndMissingPagesAreErrorsThatLeaveStateUntouched) {
  TestSequence seq(*model_);
  const std::vector<int32_t> bad = {5, static_cast<int32_t>(vocab_), 7};
  seq.Reserve(3);
  const models::SequenceInput input{&seq.state(), bad, {}, false};
  std::vector<float> logits(vocab_);
  absl::Status status = model_->Forward(*ops_, ws_, {&input, 1}, logits.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("token id 1024 at index 1"), std::string::npos) << status;
  EXPECT_EQ(seq.state().tokens, 0);

  const std::vector<int32_t> negative = {-1};
  const models::SequenceInput neg{&seq.state(), negative, {}, false};
  EXPECT_EQ(model_->Forward(*ops_, ws_, {&neg, 1}, logits.data()).code(),
            absl::StatusCode::kInvalidArgument);

  if (model_->config().num_attention_layers > 0) {
    TestSequence no_pages(*model_);
    const std::vector<int32_t> ok = {5, 6};
    const models::SequenceInput in{&no_pages.state(), ok, {}, false};
    EXPECT_EQ(model_->Forward(*ops_, ws_, {&in, 1}, logits.data()).code(),
              absl::StatusCode::kFailedPrecondition);
  }

  std::vector<float> block(model_->layout().ssm_block_floats());
  const std::vector<int32_t> two = {5, 6};
  const models::SsmSnapshot late[1] = {{3, block.data()}};
  const models::SequenceInput snap{&seq.state(), two, late, false};
  EXPECT_EQ(model_->Forward(*ops_, ws_, {&snap, 1}, logits.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

std::vector<ExactnessCase> AllCases() {
  std::vector<ExactnessCase> cases;
  for (const char* model : {"jamba-tiny", "zamba2-tiny", "zamba2-tiny-1block", "mamba2-tiny",
                            "granite-tiny", "granite-tiny-dense", "nemotron-h-tiny",
                            "nemotron3-tiny", "bamba-tiny"}) {
    for (const char* backend : {"cpu", "cpu_invariant", "reference"}) {
      cases.push_back({model, backend});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, StateExactnessTest, ::testing::ValuesIn(AllCases()),
                         [](const auto& info) {
                           std::string name = info.param.model + "_" + info.param.backend;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tandem::testing
