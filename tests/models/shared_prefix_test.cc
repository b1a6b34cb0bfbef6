// Hydragen in the model (docs/ARCHITECTURE.md, "Hydragen"): the page-pointer trie of
// SharedPrefixPlan, and a batch of decoding sequences whose states share the KV pages of cached
// prefixes giving the same logits as the same sequences holding private copies of those pages
// (which attend plainly): within rounding where Hydragen merges parts, bit for bit on the
// batch-invariant CPU backend, where it resumes each row's own attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "model_test_util.h"
#include "models/model.h"
#include "models/shared_prefix_plan.h"

namespace tandem::testing {
namespace {

using models::Segment;
using models::SequenceState;
using models::SharedPrefixNode;
using models::SharedPrefixPlan;

// ---- The plan, on page pointers alone (never dereferenced). ----

float* Page(int64_t id) { return reinterpret_cast<float*>(0x10000 + 64 * id); }

struct PlanCase {
  std::vector<SequenceState> states;
  std::vector<Segment> segments;
  kernels::Workspace ws;

  // A sequence whose pages are `ids`, running `tokens` new tokens at `start_pos`.
  void Add(const std::vector<int64_t>& ids, int64_t start_pos, int64_t tokens = 1) {
    SequenceState s;
    for (int64_t id : ids) s.kv_pages.push_back(Page(id));
    s.tokens = start_pos;
    states.push_back(std::move(s));
    segments.push_back({nullptr, 0, tokens, start_pos, {}});
  }
  SharedPrefixPlan Plan(int64_t min_work = 0) {
    for (size_t i = 0; i < states.size(); ++i) segments[i].state = &states[i];
    return models::PlanSharedPrefixes(segments, 16, min_work, ws);
  }
};

// The members of a node, as segment indices in plan order.
std::vector<int32_t> Members(const SharedPrefixPlan& plan, const SharedPrefixNode& node) {
  return {plan.order.begin() + node.first, plan.order.begin() + node.first + node.count};
}

TEST(SharedPrefixPlanTest, TwoSequencesSharingPagesFormOneNode) {
  PlanCase c;
  c.Add({1, 2, 3, 10}, 3 * 16 + 5);  // shares pages 1, 2, 3; page 10 is its own
  c.Add({7, 8}, 20);                 // shares nothing
  c.Add({1, 2, 3, 11}, 3 * 16 + 9);
  const SharedPrefixPlan plan = c.Plan();
  ASSERT_EQ(plan.nodes.size(), 1u);
  EXPECT_EQ(plan.nodes[0].page_begin, 0);
  EXPECT_EQ(plan.nodes[0].page_end, 3);
  EXPECT_EQ(plan.nodes[0].parent, -1);
  std::vector<int32_t> members = Members(plan, plan.nodes[0]);
  std::sort(members.begin(), members.end());
  EXPECT_EQ(members, (std::vector<int32_t>{0, 2}));
  ASSERT_EQ(plan.order.size(), 2u);  // the unrelated sequence attends plainly
  EXPECT_EQ(plan.leaf[0], 0);
  EXPECT_EQ(plan.leaf[1], 0);
}

TEST(SharedPrefixPlanTest, HierarchicalSharingGivesOneNodePerLevel) {
  PlanCase c;
  // A system prompt (pages 1, 2) shared by all five; conversation A (pages 3, 4, 5) by 0, 1, 4,
  // conversation B (page 6) by 2, 3.
  c.Add({1, 2, 3, 4, 5, 20}, 5 * 16 + 3);
  c.Add({1, 2, 3, 4, 5, 21}, 5 * 16);
  c.Add({1, 2, 6, 22}, 3 * 16 + 15);
  c.Add({1, 2, 6, 23}, 3 * 16 + 1);
  c.Add({1, 2, 3, 4, 5, 24}, 5 * 16 + 7);
  const SharedPrefixPlan plan = c.Plan();
  ASSERT_EQ(plan.nodes.size(), 3u);
  EXPECT_EQ(plan.nodes[0].count, 5);
  EXPECT_EQ(plan.nodes[0].page_end, 2);
  for (size_t n = 1; n < 3; ++n) {
    const SharedPrefixNode& node = plan.nodes[n];
    EXPECT_EQ(node.parent, 0);
    EXPECT_EQ(node.page_begin, 2);
    std::vector<int32_t> members = Members(plan, node);
    std::sort(members.begin(), members.end());
    if (node.count == 3) {
      EXPECT_EQ(node.page_end, 5);
      EXPECT_EQ(members, (std::vector<int32_t>{0, 1, 4}));
    } else {
      EXPECT_EQ(node.page_end, 3);
      EXPECT_EQ(members, (std::vector<int32_t>{2, 3}));
    }
  }
  for (size_t i = 0; i < plan.order.size(); ++i) EXPECT_GT(plan.leaf[i], 0);
}

TEST(SharedPrefixPlanTest, OnlyPagesBeforeTheNewTokenAndOnlyDecodeRowsTakePart) {
  PlanCase c;
  // Both hold page 2 too, but their new token lies in it (positions 16 … 31): only page 1 counts.
  c.Add({1, 2}, 20);
  c.Add({1, 2}, 16);
  c.Add({1, 2, 3}, 30, /*tokens=*/4);  // prefill: plain attention
  c.Add({1, 2}, 15);                   // nothing wholly before position 15
  const SharedPrefixPlan plan = c.Plan();
  ASSERT_EQ(plan.nodes.size(), 1u);
  EXPECT_EQ(plan.nodes[0].page_end, 1);
  std::vector<int32_t> members = Members(plan, plan.nodes[0]);
  std::sort(members.begin(), members.end());
  EXPECT_EQ(members, (std::vector<int32_t>{0, 1}));
}

TEST(SharedPrefixPlanTest, NodesBelowTheThresholdJoinTheirChildren) {
  PlanCase c;
  // Page 1 shared by four (4 × 16 = 64 sequence-tokens); pages 2 … 11 by two (2 × 160 = 320).
  std::vector<int64_t> deep = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  auto with = [&](std::vector<int64_t> v, int64_t own) {
    v.push_back(own);
    return v;
  };
  c.Add(with(deep, 30), 11 * 16 + 1);
  c.Add(with(deep, 31), 11 * 16 + 2);
  c.Add({1, 40}, 16 + 3);
  c.Add({1, 41}, 16 + 4);
  const SharedPrefixPlan plan = c.Plan(/*min_work=*/100);
  ASSERT_EQ(plan.nodes.size(), 1u);
  EXPECT_EQ(plan.nodes[0].count, 2);
  EXPECT_EQ(plan.nodes[0].page_begin, 0);  // the root's page joins the deeper node
  EXPECT_EQ(plan.nodes[0].page_end, 11);
  EXPECT_EQ(plan.order.size(), 2u);  // the other two attend plainly
  EXPECT_TRUE(c.Plan(/*min_work=*/1000).nodes.empty());
}

TEST(SharedPrefixPlanTest, FewerThanTwoDecodeRowsPlanNothing) {
  PlanCase c;
  c.Add({1, 2}, 20);
  EXPECT_TRUE(c.Plan().nodes.empty());
  EXPECT_TRUE(c.Plan().order.empty());
}

// ---- The model: shared pages vs private copies. ----

std::vector<int32_t> Tokens(int n, int seed) {
  std::vector<int32_t> ids;
  uint32_t x = 2654435761u * (seed + 7);
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    ids.push_back(4 + static_cast<int32_t>((x >> 8) % 900));
  }
  return ids;
}

// A sequence whose pages are either borrowed (a cached prefix's, shared by pointer) or its own.
class Seq {
 public:
  explicit Seq(const models::Model& model) : model_(model) {
    ssm_.assign(std::max<int64_t>(model.layout().ssm_block_floats(), 1), 0.0f);
    state_.ssm = ssm_.data();
  }
  SequenceState& state() { return state_; }
  // Starts from `prefix` (its first `pages` pages and the SSM block after pages·page_tokens
  // tokens), sharing those pages or copying them.
  void StartFrom(const Seq& prefix, const std::vector<float>& ssm_block, int64_t pages,
                 bool share) {
    for (int64_t p = 0; p < pages; ++p) {
      if (share) {
        state_.kv_pages.push_back(prefix.state_.kv_pages[p]);
      } else {
        float* own = NewPage();
        std::memcpy(own, prefix.state_.kv_pages[p], model_.layout().kv_page_bytes());
      }
    }
    std::copy(ssm_block.begin(), ssm_block.end(), ssm_.begin());
    state_.tokens = pages * model_.layout().page_tokens();
  }
  void Reserve(int64_t tokens) {
    while (static_cast<int64_t>(state_.kv_pages.size()) < model_.layout().PagesFor(tokens)) {
      NewPage();
    }
  }
  std::vector<float> SsmCopy() const { return ssm_; }

 private:
  float* NewPage() {
    pages_.push_back(std::make_unique<float[]>(model_.layout().kv_page_floats()));
    state_.kv_pages.push_back(pages_.back().get());
    return pages_.back().get();
  }
  const models::Model& model_;
  std::vector<float> ssm_;
  std::vector<std::unique_ptr<float[]>> pages_;
  SequenceState state_;
};

struct ModelCase {
  std::string model;
  std::string backend;
};

class SharedPrefixModelTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    models::LoadOptions options;
    options.page_tokens = 8;
    auto model = models::Model::Load(ModelDir(GetParam().model), options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    const std::string& backend = GetParam().backend;
    ops_ = backend == "reference" ? kernels::MakeReferenceOps()
                                  : kernels::MakeCpuOps(2, backend == "cpu_invariant");
    options_.hydragen.min_shared_work = 0;  // tiny models: share every common page
    options_.stats = &stats_;
  }

  // Runs one batch; returns its logits (last row per sequence). `ws` replaces ws_ when given.
  std::vector<float> Run(std::vector<Seq*> seqs, const std::vector<std::vector<int32_t>>& tokens,
                         kernels::Workspace* ws = nullptr) {
    std::vector<models::SequenceInput> batch;
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i]->Reserve(seqs[i]->state().tokens + static_cast<int64_t>(tokens[i].size()));
      batch.push_back({&seqs[i]->state(), tokens[i], {}, false});
    }
    std::vector<float> logits(models::Model::LogitRows(batch) * model_->config().vocab_size);
    const absl::Status status =
        model_->Forward(*ops_, ws != nullptr ? *ws : ws_, batch, logits.data(), options_);
    EXPECT_TRUE(status.ok()) << status;
    return logits;
  }

  std::unique_ptr<models::Model> model_;
  std::unique_ptr<kernels::Ops> ops_;
  kernels::Workspace ws_;
  models::ForwardOptions options_;
  models::ForwardStats stats_;
};

// Two levels of cached prefixes: a root of 3 pages, then two branches of 2 and 3 more pages.
// Five sequences start from them (two per branch, one from the root alone), a sixth shares
// nothing, and a seventh prefills in the same batches (mixed batch). Each then runs its own
// prompt tail (not a multiple of the page size), and all decode three steps together. With
// shared pages the decode steps use Hydragen; with private copies, plain attention.
TEST_P(SharedPrefixModelTest, SharedPagesGiveTheLogitsOfPrivateCopies) {
  const int32_t pt = model_->layout().page_tokens();
  const int64_t vocab = model_->config().vocab_size;
  // The cached prefixes, prefilled once.
  Seq root(*model_);
  Run({&root}, {Tokens(3 * pt, 1)});
  const std::vector<float> root_ssm = root.SsmCopy();
  std::vector<std::unique_ptr<Seq>> branches;
  std::vector<std::vector<float>> branch_ssm;
  const int64_t branch_pages[] = {5, 6};
  for (int b = 0; b < 2; ++b) {
    branches.push_back(std::make_unique<Seq>(*model_));
    branches[b]->StartFrom(root, root_ssm, 3, true);
    Run({branches[b].get()}, {Tokens((branch_pages[b] - 3) * pt, 2 + b)});
    branch_ssm.push_back(branches[b]->SsmCopy());
  }

  auto run_all = [&](bool share) {
    std::vector<std::unique_ptr<Seq>> seqs;
    for (int i = 0; i < 7; ++i) seqs.push_back(std::make_unique<Seq>(*model_));
    seqs[0]->StartFrom(*branches[0], branch_ssm[0], branch_pages[0], share);
    seqs[1]->StartFrom(*branches[0], branch_ssm[0], branch_pages[0], share);
    seqs[2]->StartFrom(*branches[1], branch_ssm[1], branch_pages[1], share);
    seqs[3]->StartFrom(*branches[1], branch_ssm[1], branch_pages[1], share);
    seqs[4]->StartFrom(root, root_ssm, 3, share);
    std::vector<Seq*> all;
    for (auto& s : seqs) all.push_back(s.get());
    std::vector<std::vector<int32_t>> tokens;
    for (int i = 0; i < 7; ++i) tokens.push_back(Tokens(1 + 3 * i, 10 + i));
    tokens[6] = Tokens(2, 30);  // the late joiner prefills a little now …
    std::vector<float> logits = Run(all, tokens);
    for (int step = 0; step < 3; ++step) {
      for (int i = 0; i < 7; ++i) tokens[i] = {static_cast<int32_t>(5 + 37 * step + 11 * i)};
      if (step == 1) tokens[6] = Tokens(9, 31);  // … and more while the others decode
      std::vector<float> step_logits = Run(all, tokens);
      logits.insert(logits.end(), step_logits.begin(), step_logits.end());
    }
    return logits;
  };
  const int64_t nodes_before = stats_.hydragen_nodes;
  const std::vector<float> shared = run_all(true);
  const int64_t nodes_shared = stats_.hydragen_nodes - nodes_before;
  const std::vector<float> priv = run_all(false);
  EXPECT_EQ(stats_.hydragen_nodes - nodes_before, nodes_shared)
      << "private copies must attend plainly";
  // Three decode steps × attention layers × three nodes (root, two branches).
  EXPECT_EQ(nodes_shared, 3 * 3 * model_->layout().num_attention_layers());

  ASSERT_EQ(shared.size(), priv.size());
  ASSERT_EQ(shared.size(), static_cast<size_t>(4 * 7 * vocab));
  if (GetParam().backend == "cpu_invariant") {
    // Hydragen resumes each row's own attention (kernels/cpu/attention_stream.h): the bits.
    EXPECT_EQ(std::memcmp(shared.data(), priv.data(), shared.size() * sizeof(float)), 0)
        << "max |difference| " << MaxAbsDiff(shared, priv);
    return;
  }
  float scale = 0.0f;
  for (float l : priv) scale = std::max(scale, std::fabs(l));
  // Reference: every attention part accumulates in double, so Hydragen and plain attention
  // differ only by the fp32 rounding of the parts and their LSE; observed ≤ 5e-7 of the logit
  // scale. CpuOps: both paths sum in fp32 in different orders (GEMM tiles vs per-key dot
  // products) and round exp differently (FastExp), ~1e-6 relative per attention output, which
  // the following layers carry to the logits at about that size; observed ≤ 1e-6 of the scale,
  // so 2e-5 leaves margin for other shapes while a wrong merge weight shows up at ~1e-2.
  const float rel = GetParam().backend == "reference" ? 1e-5f : 2e-5f;
  EXPECT_LE(MaxAbsDiff(shared, priv), rel * scale) << "logit scale " << scale;
}

// Activations in a workspace of their own memory and the layer graph's tables in a separate
// host scratch, as a device backend runs: the same logits bit for bit, Hydragen's plans and
// pointer tables included, and both workspaces used.
TEST_P(SharedPrefixModelTest, SeparateHostScratchGivesTheSameLogits) {
  class CountingMemory final : public kernels::MemorySource {
   public:
    void* Allocate(size_t bytes) override {
      ++live;
      return kernels::HostMemory().Allocate(bytes);
    }
    void Release(void* p) override {
      --live;
      kernels::HostMemory().Release(p);
    }
    int live = 0;
  };
  const int32_t pt = model_->layout().page_tokens();
  Seq root(*model_);
  Run({&root}, {Tokens(3 * pt, 1)});
  const std::vector<float> root_ssm = root.SsmCopy();
  auto run = [&](kernels::Workspace* ws) {
    Seq a(*model_), b(*model_);
    a.StartFrom(root, root_ssm, 3, true);
    b.StartFrom(root, root_ssm, 3, true);
    std::vector<float> logits = Run({&a, &b}, {Tokens(5, 2), Tokens(7, 3)}, ws);
    for (int step = 0; step < 2; ++step) {
      const std::vector<float> more = Run({&a, &b}, {{9 + step}, {12 + step}}, ws);
      logits.insert(logits.end(), more.begin(), more.end());
    }
    return logits;
  };
  const std::vector<float> together = run(nullptr);
  CountingMemory memory;
  {
    kernels::Workspace activations(1 << 16, &memory), host(1 << 12);
    options_.host_scratch = &host;
    const int64_t nodes_before = stats_.hydragen_nodes;
    EXPECT_EQ(run(&activations), together);
    EXPECT_GT(stats_.hydragen_nodes, nodes_before) << "the decode steps must use Hydragen";
    options_.host_scratch = nullptr;
    EXPECT_GT(memory.live, 0);
    EXPECT_GT(host.high_water_bytes(), 0u);
    EXPECT_GT(activations.high_water_bytes(), host.high_water_bytes());
  }
  EXPECT_EQ(memory.live, 0) << "every block goes back to its source";
}

INSTANTIATE_TEST_SUITE_P(Models, SharedPrefixModelTest,
                         ::testing::Values(ModelCase{"jamba-tiny", "reference"},
                                           ModelCase{"jamba-tiny", "cpu"},
                                           ModelCase{"zamba2-tiny", "reference"},
                                           ModelCase{"zamba2-tiny", "cpu"},
                                           ModelCase{"jamba-tiny", "cpu_invariant"},
                                           ModelCase{"zamba2-tiny", "cpu_invariant"}),
                         [](const auto& info) {
                           std::string name = info.param.model + "_" + info.param.backend;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace tandem::testing
