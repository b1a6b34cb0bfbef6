// Tensor parallelism on the CPU: every family's tiny checkpoint split over 2 (and where its
// dimensions allow, 4) workers, each a thread with its own backend, slice and state, must give
// the logits of the whole model (up to the rounding of sums taken in another order) through
// prefill, a varlen batch, decode steps and a checkpoint restore.
#include "models/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "kernels/cpu/host_collectives.h"
#include "kernels/workspace.h"
#include "model_test_util.h"
#include "models/model.h"
#include "models/tensor_parallel_group.h"

namespace tandem::models {
namespace {

using ::tandem::testing::MaxAbsDiff;
using ::tandem::testing::ModelDir;
using ::tandem::testing::ParityOptions;
using ::tandem::testing::TestSequence;

// A model split over `ranks` workers, run together: each call runs one batch on every worker
// (a thread each) and returns the logits of worker 0.
class ShardedModel {
 public:
  static std::unique_ptr<ShardedModel> Load(const std::string& name, int32_t ranks) {
    auto sharded = std::unique_ptr<ShardedModel>(new ShardedModel(ranks));
    for (int32_t r = 0; r < ranks; ++r) {
      LoadOptions options = ParityOptions(4);
      options.shard = {r, ranks};
      absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(ModelDir(name), options);
      if (!model.ok()) {
        ADD_FAILURE() << name << " rank " << r << ": " << model.status();
        return nullptr;
      }
      sharded->workers_.push_back(std::make_unique<Worker>(std::move(*model)));
    }
    return sharded;
  }

  int32_t ranks() const { return static_cast<int32_t>(workers_.size()); }
  const Model& model(int32_t rank) const { return *workers_[rank]->model; }
  int64_t vocab() const { return model(0).config().vocab_size; }

  // A new sequence on every worker; returns its index.
  int NewSequence() {
    for (auto& w : workers_) w->sequences.push_back(std::make_unique<TestSequence>(*w->model));
    return static_cast<int>(workers_[0]->sequences.size()) - 1;
  }
  // Copies sequence `from`'s SSM state and KV pages on every worker into sequence `to` (a
  // checkpoint restored), which then continues from `tokens`.
  void CopySequence(int from, int to, int64_t tokens) {
    for (auto& w : workers_) {
      const StateLayout& layout = w->model->layout();
      TestSequence& src = *w->sequences[from];
      TestSequence& dst = *w->sequences[to];
      dst.Reserve(tokens);
      std::memcpy(dst.state().ssm, src.state().ssm, layout.ssm_block_bytes());
      for (size_t p = 0; p < dst.state().kv_pages.size(); ++p) {
        std::memcpy(dst.state().kv_pages[p], src.state().kv_pages[p], layout.kv_page_bytes());
      }
      dst.state().tokens = tokens;
    }
  }

  // Runs `tokens[i]` on sequence `ids[i]` as one batch on every worker at once.
  std::vector<float> Run(const std::vector<int>& ids,
                         const std::vector<std::vector<int32_t>>& tokens, bool all_logits) {
    std::vector<absl::Status> status(workers_.size());
    std::vector<float> logits;
    auto run = [&](int32_t r) {
      Worker& w = *workers_[r];
      std::vector<SequenceInput> batch;
      for (size_t i = 0; i < ids.size(); ++i) {
        TestSequence& seq = *w.sequences[ids[i]];
        seq.Reserve(seq.state().tokens + static_cast<int64_t>(tokens[i].size()));
        batch.push_back({&seq.state(), tokens[i], {}, all_logits});
      }
      ForwardOptions options;
      options.collectives = &group_.member(r);
      if (r == 0) logits.resize(Model::LogitRows(batch) * vocab());
      status[r] = w.model->Forward(*w.ops, w.ws, batch, r == 0 ? logits.data() : nullptr, options);
    };
    std::vector<std::thread> threads;
    for (int32_t r = 1; r < ranks(); ++r) threads.emplace_back(run, r);
    run(0);
    for (std::thread& t : threads) t.join();
    for (size_t r = 0; r < status.size(); ++r) {
      EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    }
    return logits;
  }

 private:
  struct Worker {
    explicit Worker(std::unique_ptr<Model> m) : model(std::move(m)), ops(kernels::MakeCpuOps(1)) {}
    std::unique_ptr<Model> model;
    std::unique_ptr<kernels::Ops> ops;
    kernels::Workspace ws;
    std::vector<std::unique_ptr<TestSequence>> sequences;
  };

  explicit ShardedModel(int32_t ranks) : group_(ranks) {}
  kernels::HostCollectiveGroup group_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

// The whole model, run the same way.
struct WholeModel {
  explicit WholeModel(const std::string& name) : ops(kernels::MakeCpuOps(1)) {
    absl::StatusOr<std::unique_ptr<Model>> loaded = Model::Load(ModelDir(name), ParityOptions(4));
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) model = std::move(*loaded);
  }
  std::vector<float> Run(std::vector<TestSequence*> seqs,
                         const std::vector<std::vector<int32_t>>& tokens, bool all_logits) {
    std::vector<SequenceInput> batch;
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i]->Reserve(seqs[i]->state().tokens + static_cast<int64_t>(tokens[i].size()));
      batch.push_back({&seqs[i]->state(), tokens[i], {}, all_logits});
    }
    std::vector<float> logits(Model::LogitRows(batch) * model->config().vocab_size);
    const absl::Status status = model->Forward(*ops, ws, batch, logits.data());
    EXPECT_TRUE(status.ok()) << status;
    return logits;
  }
  std::unique_ptr<Model> model;
  std::unique_ptr<kernels::Ops> ops;
  kernels::Workspace ws;
};

int32_t Argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Sums in another order round differently; the logits of these models are O(1-10).
constexpr float kTolerance = 2e-4f;

struct Case {
  std::string model;
  int32_t ranks;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " over " << c.ranks; }

class TensorParallelTest : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallelTest, MatchesTheWholeModel) {
  const Case& c = GetParam();
  WholeModel whole(c.model);
  ASSERT_NE(whole.model, nullptr);
  std::unique_ptr<ShardedModel> sharded = ShardedModel::Load(c.model, c.ranks);
  ASSERT_NE(sharded, nullptr);
  const int32_t vocab = whole.model->config().vocab_size;
  for (int32_t r = 0; r < c.ranks; ++r) {
    EXPECT_EQ(sharded->model(r).shard().rank, r);
    // Each worker holds its share of the state.
    const StateLayout& layout = sharded->model(r).layout();
    EXPECT_EQ(layout.workers(), c.ranks);
    if (whole.model->config().num_ssm_layers > 0) {
      EXPECT_LT(layout.worker_ssm_block_floats(), whole.model->layout().ssm_block_floats());
      EXPECT_EQ(layout.ssm_block_floats(), layout.worker_ssm_block_floats() * c.ranks);
    }
    if (whole.model->config().num_attention_layers > 0) {
      // Its key/value heads: a share of them, or the one its query heads read.
      const int32_t kv_heads = whole.model->config().attention.kv_heads;
      const int32_t held = kv_heads % c.ranks == 0 ? kv_heads / c.ranks : 1;
      EXPECT_EQ(layout.worker_kv_page_floats() * kv_heads,
                whole.model->layout().kv_page_floats() * held);
      EXPECT_EQ(layout.kv_page_floats(), layout.worker_kv_page_floats() * c.ranks);
    }
  }

  // A varlen prefill of two prompts of different lengths, every row's logits.
  const std::vector<int32_t> a = {1, 17, 33, 5, 60, 2, 9, 41, 7, 3, 28};
  const std::vector<int32_t> b = {4, 8, 15, 16, 23, 42};
  TestSequence wa(*whole.model), wb(*whole.model);
  const int sa = sharded->NewSequence(), sb = sharded->NewSequence();
  std::vector<float> expected = whole.Run({&wa, &wb}, {a, b}, true);
  std::vector<float> got = sharded->Run({sa, sb}, {a, b}, true);
  EXPECT_LT(MaxAbsDiff(got, expected), kTolerance) << "prefill";

  // Greedy decode steps of both sequences as one batch.
  auto row = [&](size_t r) {
    return std::span<const float>(expected.data() + r * vocab, static_cast<size_t>(vocab));
  };
  size_t row_a = a.size() - 1, row_b = a.size() + b.size() - 1;
  for (int step = 0; step < 6; ++step) {
    const int32_t na = Argmax(row(row_a)), nb = Argmax(row(row_b));
    row_a = 0;
    row_b = 1;
    expected = whole.Run({&wa, &wb}, {{na}, {nb}}, false);
    got = sharded->Run({sa, sb}, {{na}, {nb}}, false);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LT(MaxAbsDiff(got, expected), kTolerance) << "decode step " << step;
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(Argmax({got.data() + r * vocab, static_cast<size_t>(vocab)}), Argmax(row(r)))
          << "decode step " << step << " row " << r;
    }
  }

  // A checkpoint restored: sequence a's state after its prompt (and 6 steps), copied on every
  // worker, continues exactly as a does.
  const int64_t at = wa.state().tokens;
  const int sc = sharded->NewSequence();
  sharded->CopySequence(sa, sc, at);
  const std::vector<int32_t> more = {11, 12, 13};
  const std::vector<float> from_a = sharded->Run({sa}, {more}, true);
  const std::vector<float> from_copy = sharded->Run({sc}, {more}, true);
  EXPECT_EQ(from_a, from_copy);
  const std::vector<float> whole_more = whole.Run({&wa}, {more}, true);
  EXPECT_LT(MaxAbsDiff(from_a, whole_more), kTolerance) << "after the restore";
}

INSTANTIATE_TEST_SUITE_P(
    Families, TensorParallelTest,
    ::testing::Values(Case{"jamba-tiny", 2}, Case{"jamba-tiny-projbias", 2}, Case{"zamba2-tiny", 2},
                      Case{"zamba2-tiny-1block", 2}, Case{"mamba2-tiny", 2}, Case{"mamba2-tiny", 4},
                      Case{"bamba-tiny", 2}, Case{"granite-tiny", 2}, Case{"granite-tiny", 4},
                      Case{"granite-tiny-dense", 2}, Case{"jamba-tiny", 4},
                      Case{"nemotron-h-tiny", 2}, Case{"nemotron3-tiny", 2},
                      Case{"nemotron3-tiny-nolatent", 2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.model + "_" + std::to_string(info.param.ranks);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// The group runs its workers behind the lead's own Forward, on their parts of the same units.
TEST(TensorParallelGroupTest, TheLeadRunsLikeTheWholeModel) {
  for (const std::string name : {"granite-tiny", "zamba2-tiny", "mamba2-tiny"}) {
    SCOPED_TRACE(name);
    WholeModel whole(name);
    ASSERT_NE(whole.model, nullptr);
    absl::StatusOr<std::unique_ptr<TensorParallelGroup>> group = TensorParallelGroup::Load(
        ModelDir(name), 2, ParityOptions(4), [](int32_t) { return kernels::MakeCpuOps(1); });
    ASSERT_TRUE(group.ok()) << group.status();
    const Model& lead = (*group)->lead();
    EXPECT_EQ((*group)->workers(), 2);
    EXPECT_EQ(lead.layout().ssm_block_floats(), 2 * lead.layout().worker_ssm_block_floats());
    std::unique_ptr<kernels::Ops> ops = kernels::MakeCpuOps(1);
    kernels::Workspace ws;

    // A refused batch is refused by every worker, and the group goes on.
    TestSequence bad(lead);
    const std::vector<int32_t> out_of_vocabulary = {1, 1 << 30};
    const SequenceInput refused{&bad.state(), out_of_vocabulary, {}, false};
    bad.Reserve(2);
    std::vector<float> logits(lead.config().vocab_size);
    const absl::Status status = lead.Forward(*ops, ws, {&refused, 1}, logits.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;

    TestSequence seq(lead), reference(*whole.model);
    std::vector<int32_t> tokens = {3, 14, 15, 92, 65, 35, 8};
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> want = whole.Run({&reference}, {tokens}, false);
      const std::vector<float> got =
          ::tandem::testing::RunTokens(lead, *ops, ws, seq, tokens, false);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_LT(MaxAbsDiff(got, want), kTolerance) << "step " << step;
      tokens = {Argmax(want)};
    }
  }
}

// Four workers, each holding one of Mamba-2's two groups for two of them and a quarter of a norm
// that spans them all: a checkpoint taken mid-prefill holds every worker's part, and a sequence
// restored from it continues as the original does.
TEST(TensorParallelGroupTest, ACheckpointHoldsEveryWorkersPart) {
  WholeModel whole("mamba2-tiny");
  ASSERT_NE(whole.model, nullptr);
  absl::StatusOr<std::unique_ptr<TensorParallelGroup>> group = TensorParallelGroup::Load(
      ModelDir("mamba2-tiny"), 4, ParityOptions(4), [](int32_t) { return kernels::MakeCpuOps(1); });
  ASSERT_TRUE(group.ok()) << group.status();
  const Model& lead = (*group)->lead();
  // The lead counts every worker's slice (the replicated embeddings and norms once per worker).
  EXPECT_GT(lead.parameters(), whole.model->parameters());
  EXPECT_GT(lead.weight_bytes(), whole.model->weight_bytes());
  std::unique_ptr<kernels::Ops> ops = kernels::MakeCpuOps(1);
  kernels::Workspace ws;

  const std::vector<int32_t> tokens = {7, 3, 21, 9, 40, 2, 18, 33, 5};
  std::vector<float> checkpoint(lead.layout().ssm_block_floats(), 0.0f);
  const SsmSnapshot snapshot{5, checkpoint.data()};
  TestSequence original(lead);
  const std::vector<float> full =
      ::tandem::testing::RunTokens(lead, *ops, ws, original, tokens, true, {&snapshot, 1});
  ASSERT_FALSE(full.empty());
  // Every worker wrote its quarter of the checkpoint.
  const int64_t part = lead.layout().worker_ssm_block_floats();
  for (int32_t w = 0; w < 4; ++w) {
    const auto begin = checkpoint.begin() + w * part;
    EXPECT_TRUE(std::any_of(begin, begin + part, [](float v) { return v != 0.0f; }))
        << "worker " << w << "'s part is empty";
  }

  TestSequence restored(lead);
  std::copy(checkpoint.begin(), checkpoint.end(), restored.state().ssm);
  restored.state().tokens = 5;
  const std::vector<int32_t> rest(tokens.begin() + 5, tokens.end());
  const std::vector<float> resumed =
      ::tandem::testing::RunTokens(lead, *ops, ws, restored, rest, true);
  const int64_t vocab = lead.config().vocab_size;
  ASSERT_EQ(resumed.size(), rest.size() * vocab);
  const std::vector<float> tail(full.end() - static_cast<ptrdiff_t>(resumed.size()), full.end());
  EXPECT_LT(MaxAbsDiff(resumed, tail), 1e-5f);
  TestSequence reference(*whole.model);
  const std::vector<float> want = whole.Run({&reference}, {tokens}, true);
  EXPECT_LT(MaxAbsDiff(full, want), kTolerance);
}

TEST(TensorParallelConfigTest, RefusesASplitTheDimensionsDoNotAllow) {
  LoadOptions options = ParityOptions(4);
  options.shard = {0, 3};
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(ModelDir("jamba-tiny"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("over 3 ranks"), std::string_view::npos)
      << model.status();
  EXPECT_NE(model.status().message().find("attention head count (4)"), std::string_view::npos)
      << model.status();

  // Zamba2's gated norm has 2 groups: over 4 ranks each would span two of them.
  options.shard = {1, 4};
  model = Model::Load(ModelDir("zamba2-tiny"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("gated-norm groups"), std::string_view::npos)
      << model.status();

  options.shard = {2, 2};
  model = Model::Load(ModelDir("mamba2-tiny"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("rank 2 is outside [0, 2)"), std::string_view::npos)
      << model.status();
}

TEST(TensorParallelConfigTest, AShardedModelNeedsItsOwnCollectives) {
  LoadOptions options = ParityOptions(4);
  options.shard = {1, 2};
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(ModelDir("mamba2-tiny"), options);
  ASSERT_TRUE(model.ok()) << model.status();
  std::unique_ptr<kernels::Ops> ops = kernels::MakeCpuOps(1);
  kernels::Workspace ws;
  TestSequence seq(**model);
  const std::vector<int32_t> tokens = {1, 2, 3};
  const SequenceInput input{&seq.state(), tokens, {}, false};
  // Alone, or with worker 0's end of a group, it is refused before anything runs.
  absl::Status status = (*model)->Forward(*ops, ws, {&input, 1}, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("no collectives"), std::string_view::npos) << status;
  kernels::HostCollectiveGroup group(2);
  ForwardOptions forward;
  forward.collectives = &group.member(0);
  status = (*model)->Forward(*ops, ws, {&input, 1}, nullptr, forward);
  EXPECT_NE(status.message().find("worker 0 of 2"), std::string_view::npos) << status;
  // Worker 1 holds no LM head: asking it for logits is refused too.
  std::vector<float> logits((*model)->config().vocab_size);
  forward.collectives = &group.member(1);
  status = (*model)->Forward(*ops, ws, {&input, 1}, logits.data(), forward);
  EXPECT_NE(status.message().find("holds no LM head"), std::string_view::npos) << status;
  EXPECT_EQ(seq.state().tokens, 0);
}

TEST(TensorSliceTest, CopiesTheKeptRangesOfAnyDimension) {
  // A [2, 3, 4] tensor of 0..23; keep columns {1} and {3} of the last dimension.
  std::vector<float> t(24);
  for (int i = 0; i < 24; ++i) t[i] = static_cast<float>(i);
  TensorSlice slice;
  slice.dim = 2;
  slice.ranges = {{1, 2}, {3, 4}};
  absl::StatusOr<std::vector<int64_t>> shape = SlicedShape({2, 3, 4}, slice);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, (std::vector<int64_t>{2, 3, 2}));
  std::vector<float> out(12);
  CopySlice(reinterpret_cast<const uint8_t*>(t.data()), {2, 3, 4}, sizeof(float), slice,
            reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_EQ(out, (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  // Rows 1..2 of dimension 1 (the middle one).
  slice.dim = 1;
  slice.ranges = {{1, 3}};
  out.assign(16, 0);
  CopySlice(reinterpret_cast<const uint8_t*>(t.data()), {2, 3, 4}, sizeof(float), slice,
            reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_EQ(out, (std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23}));
  slice.ranges = {{2, 4}};
  EXPECT_FALSE(SlicedShape({2, 3, 4}, slice).ok());

  // Segments split evenly: gate ‖ up of 6 each, rank 1 of 3 keeps [2, 4) and [8, 10).
  const TensorSlice shard = ShardSegments({1, 3}, {6, 6});
  EXPECT_EQ(shard.ranges, (std::vector<std::pair<int64_t, int64_t>>{{2, 4}, {8, 10}}));
  EXPECT_EQ(shard.kept(), 4);
}

}  // namespace
}  // namespace tandem::models
