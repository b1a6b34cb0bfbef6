// A GPU replays a decode step from the CUDA graph of the previous one only when the step makes
// the same op calls with the same arguments (kernels/cuda/cuda_ops.h): the batch's data may
// change (token ids, positions, page tables: uploaded), the calls may not. This checks that
// the layer graphs keep to that on the CPU, where CI runs, by signing every op call of each
// pass the way the CUDA backend does: steps of one batch sign alike across page boundaries, and
// other batches sign otherwise.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "kernels/ops.h"
#include "tests/kernels/signing_ops.h"
#include "tests/models/model_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::models {
namespace {

using tandem::testing::ModelDir;
using tandem::testing::ParityOptions;
using tandem::testing::TestSequence;
using tandem::kernels::testing::SigningOps;

std::vector<int32_t> Ids(int n, int seed) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(4 + (seed * 131 + i * 17) % 900);
  return ids;
}

class DecodeReplayTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto model = Model::Load(ModelDir(GetParam()), ParityOptions());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    cpu_ = kernels::MakeCpuOps(2);
    ops_ = std::make_unique<SigningOps>(*cpu_);
  }

  // Prefills `count` sequences of different lengths in one pass.
  std::vector<std::unique_ptr<TestSequence>> Prefill(int count) {
    std::vector<std::unique_ptr<TestSequence>> sequences;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<SequenceInput> batch;
    for (int s = 0; s < count; ++s) {
      sequences.push_back(std::make_unique<TestSequence>(*model_));
      prompts.push_back(Ids(5 + 13 * s, s));
      sequences.back()->Reserve(static_cast<int64_t>(prompts.back().size()));
    }
    for (int s = 0; s < count; ++s) {
      batch.push_back({&sequences[s]->state(), prompts[s], {}, false});
    }
    Run(batch);
    return sequences;
  }

  // One decode step of every sequence; returns the step's signature.
  std::vector<std::byte> Step(std::vector<std::unique_ptr<TestSequence>>& sequences, int step) {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<SequenceInput> batch;
    for (size_t s = 0; s < sequences.size(); ++s) {
      tokens.push_back({4 + (step * 7 + static_cast<int>(s) * 3) % 900});
      sequences[s]->Reserve(sequences[s]->state().tokens + 1);
    }
    for (size_t s = 0; s < sequences.size(); ++s) {
      batch.push_back({&sequences[s]->state(), tokens[s], {}, false});
    }
    Run(batch);
    const std::span<const std::byte> bytes = ops_->signature().bytes();
    return {bytes.begin(), bytes.end()};
  }

  // Runs steps 1 … steps-1 of `batch` after step 0 and fails, naming the call, at the first
  // that makes other calls than step 0; with `shared`, also at one that shares no prefix.
  void ExpectStepsMakeTheSameCalls(std::vector<std::unique_ptr<TestSequence>>& batch, int steps,
                                   bool shared) {
    const std::vector<std::byte> first = Step(batch, 0);
    ASSERT_FALSE(first.empty());
    ForwardStats stats;
    for (int step = 1; step < steps; ++step) {
      stats = {};
      options_.stats = &stats;
      const std::vector<std::byte> now = Step(batch, step);
      options_.stats = nullptr;
      if (shared) {
        ASSERT_GT(stats.hydragen_nodes, 0) << "step " << step << " shared no prefix";
      }
      if (now == first) continue;
      size_t at = 0;
      while (at < now.size() && at < first.size() && now[at] == first[at]) ++at;
      FAIL() << "step " << step << " made other calls, from call " << ops_->CallAt(at) << " on"
;
    }
  }

  // As the engine runs a device's passes (engine/model_runner.cc): the layer graphs' host
  // tables in a workspace of their own, and the logits in a buffer that is kept.
  void Run(std::span<const SequenceInput> batch) {
    ops_->Clear();
    const size_t floats = Model::LogitRows(batch) * model_->config().vocab_size;
    if (logits_.size() < floats) logits_.resize(floats);
    ForwardOptions options = options_;
    options.host_scratch = &host_ws_;
    options.hydragen.min_shared_work = 0;  // the tiny models' prefixes are short
    const absl::Status status = model_->Forward(*ops_, ws_, batch, logits_.data(), options);
    ASSERT_TRUE(status.ok()) << status;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<kernels::Ops> cpu_;
  std::unique_ptr<SigningOps> ops_;
  ForwardOptions options_;
  kernels::Workspace ws_, host_ws_;
  std::vector<float> logits_ = std::vector<float>(1 << 16);
};

TEST_P(DecodeReplayTest, StepsOfOneBatchMakeTheSameCallsAcrossPageBoundaries) {
  auto sequences = Prefill(3);
  // 40 steps: every sequence crosses at least two 16-token page boundaries.
  ExpectStepsMakeTheSameCalls(sequences, 40, /*shared=*/false);
}

// Hydragen's passes: three sequences decoding after one cached prefix whose KV pages they
// share (as a prefix-cache hit leaves them), attended once for all three, behind a sequence of
// their own that comes first in the batch; every step makes the same calls while each
// sequence's own pages grow (the first one's at other steps than the rest's).
TEST_P(DecodeReplayTest, SharedPrefixStepsMakeTheSameCalls) {
  if (model_->config().num_attention_layers == 0) GTEST_SKIP() << "no attention layers";
  auto batch = Prefill(2);  // 5 and 18 tokens
  batch.erase(batch.begin());
  auto owner = Prefill(1);  // 5 tokens: not a whole page yet
  std::vector<SequenceInput> more = {{&owner[0]->state(), {}, {}, false}};
  const std::vector<int32_t> rest = Ids(27, 9);  // to 32 tokens: two whole pages
  owner[0]->Reserve(32);
  more[0].tokens = rest;
  Run(more);
  std::vector<std::unique_ptr<TestSequence>> sharing;
  for (int s = 0; s < 3; ++s) {
    sharing.push_back(std::make_unique<TestSequence>(*model_));
    SequenceState& state = sharing.back()->state();
    state.kv_pages = {owner[0]->state().kv_pages[0], owner[0]->state().kv_pages[1]};
    state.tokens = 32;
  }
  for (auto& sequence : sharing) batch.push_back(std::move(sequence));
  ExpectStepsMakeTheSameCalls(batch, 40, /*shared=*/true);
}

TEST_P(DecodeReplayTest, AnotherBatchSizeMakesOtherCalls) {
  auto three = Prefill(3);
  const std::vector<std::byte> of_three = Step(three, 0);
  auto two = Prefill(2);
  EXPECT_FALSE(Step(two, 0) == of_three);
}

INSTANTIATE_TEST_SUITE_P(Families, DecodeReplayTest,
                         ::testing::ValuesIn(tandem::testing::kFamilyFixtures),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tandem::models
