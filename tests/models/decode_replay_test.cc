// A GPU replays a decode step from the CUDA graph of the previous one only when the step makes
// the same op calls with the same arguments (kernels/cuda/cuda_ops.h): the batch's data may
// change (token ids, positions, page tables: uploaded), the calls may not. This checks that
// the layer graphs keep to that on the CPU, where CI runs, by signing every op call of each
// pass the way the CUDA backend does: steps of one batch sign alike across page boundaries, and
// other batches sign otherwise.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "kernels/launch_signature.h"
#include "kernels/ops.h"
#include "tests/models/model_test_util.h"

namespace tandem::models {
namespace {

using tandem::testing::ModelDir;
using tandem::testing::ParityOptions;
using tandem::testing::TestSequence;

// Forwards every op to `inner` and signs it: its name, every pointer and size it is given, and
// for host lists (ids, row indices: uploaded by a device) only their length, as CudaOps does.
// The ops a device overrides (RopeAt, WriteKvAt, GatherRowsAt, ScatterRowsTo) are signed as
// calls too, not as the per-run calls Ops' host defaults would make.
class SigningOps final : public kernels::Ops {
 public:
  explicit SigningOps(kernels::Ops& inner) : inner_(inner) {}
  const kernels::LaunchSignature& signature() const { return signature_; }
  void Clear() {
    signature_.Clear();
    calls_.clear();
  }
  // The call whose signed bytes hold byte `at` (to name what differs between two passes).
  std::string CallAt(size_t at) const {
    std::string name = "(none)";
    for (const auto& [offset, op] : calls_) {
      if (offset <= at) {
        name = std::string(op) + " #" + std::to_string(&op - &calls_[0].second) + ", byte " +
               std::to_string(at - offset) + " of its signature";
      }
    }
    return name;
  }

  std::string_view name() const override { return "signing"; }
  std::string ReadBack(const float* src, size_t count, float* dst) override {
    return inner_.ReadBack(src, count, dst);
  }
  void Linear(const float* x, int64_t ld_x, int64_t m, const kernels::WeightMatrix& w,
              const float* bias, float* y, int64_t ld_y) override {
    Sign("Linear", x, ld_x, m, w, bias, y, ld_y);
    inner_.Linear(x, ld_x, m, w, bias, y, ld_y);
  }
  void GatherRows(const kernels::WeightMatrix& table, std::span<const int32_t> ids, float* out,
                  int64_t ld_out) override {
    Sign("GatherRows", table, ids.size(), out, ld_out);
    inner_.GatherRows(table, ids, out, ld_out);
  }
  void CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                int64_t ld_dst) override {
    Sign("CopyRows", src, ld_src, rows, cols, dst, ld_dst);
    inner_.CopyRows(src, ld_src, rows, cols, dst, ld_dst);
  }
  void AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
               int64_t ld_dst) override {
    Sign("AddRows", src, ld_src, rows, cols, dst, ld_dst);
    inner_.AddRows(src, ld_src, rows, cols, dst, ld_dst);
  }
  void GatherRowsAt(const float* src, int64_t ld_src, std::span<const int32_t> rows, int64_t cols,
                    float* dst, int64_t ld_dst) override {
    Sign("GatherRowsAt", src, ld_src, rows.size(), cols, dst, ld_dst);
    inner_.GatherRowsAt(src, ld_src, rows, cols, dst, ld_dst);
  }
  void ScatterRowsTo(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                     int64_t cols, float* dst, int64_t ld_dst) override {
    Sign("ScatterRowsTo", src, ld_src, rows.size(), cols, dst, ld_dst);
    inner_.ScatterRowsTo(src, ld_src, rows, cols, dst, ld_dst);
  }
  // As a device does it: the table copied into `ws`, where its address depends on the pass's
  // allocations alone (the CPU backend hands back the host array itself, whose address moves
  // as host vectors grow; a device never sees that address).
  const void* TableBytes(const void* host, size_t bytes, kernels::Workspace& ws) override {
    Sign("TableBytes", bytes);
    auto* copy = ws.Array<std::byte>(std::max<size_t>(bytes, 1));
    if (bytes > 0) std::memcpy(copy, host, bytes);
    return copy;
  }
  void UploadTables(void* device, const void* host, size_t bytes) override {
    Sign("UploadTables", device, bytes);
    inner_.UploadTables(device, host, bytes);
  }
  void RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
               float eps, float* out, int64_t ld_out) override {
    Sign("RmsNorm", x, ld_x, rows, dim, weight, eps, out, ld_out);
    inner_.RmsNorm(x, ld_x, rows, dim, weight, eps, out, ld_out);
  }
  void GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z, int64_t rows,
                    int64_t dim, int32_t groups, const float* weight, float eps, float* out,
                    int64_t ld_out) override {
    Sign("GatedRmsNorm", y, ld_y, z, ld_z, rows, dim, groups, weight, eps, out, ld_out);
    inner_.GatedRmsNorm(y, ld_y, z, ld_z, rows, dim, groups, weight, eps, out, ld_out);
  }
  void Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
            int64_t start_pos, float theta) override {
    Sign("Rope", x, ld_x, tokens, heads, head_dim, start_pos, theta);
    inner_.Rope(x, ld_x, tokens, heads, head_dim, start_pos, theta);
  }
  void RopeAt(float* x, int64_t ld_x, int64_t rows, int32_t heads, int32_t head_dim,
              const int64_t* positions, float theta) override {
    Sign("RopeAt", x, ld_x, rows, heads, head_dim, positions, theta);
    inner_.RopeAt(x, ld_x, rows, heads, head_dim, positions, theta);
  }
  void GatedActivation(kernels::Activation act, const float* gate, int64_t ld_gate,
                       const float* up, int64_t ld_up, int64_t rows, int64_t cols, float* out,
                       int64_t ld_out) override {
    Sign("GatedActivation", act, gate, ld_gate, up, ld_up, rows, cols, out, ld_out);
    inner_.GatedActivation(act, gate, ld_gate, up, ld_up, rows, cols, out, ld_out);
  }
  void Moe(const kernels::MoeArgs& a, kernels::Workspace& ws) override {
    Sign("Moe", a.tokens, a.hidden, a.intermediate, a.num_experts, a.top_k, a.renormalize, a.act,
         a.x, a.ld_x, a.router, a.gate_up, a.down, a.out, a.ld_out);
    inner_.Moe(a, ws);
  }
  void CausalConv1d(const kernels::CausalConvArgs& args) override {
    Sign("CausalConv1d", args);
    inner_.CausalConv1d(args);
  }
  void CausalConv1dStep(const kernels::CausalConvArgs& args) override {
    Sign("CausalConv1dStep", args);
    inner_.CausalConv1dStep(args);
  }
  void SelectiveScan(const kernels::SelectiveScanArgs& args) override {
    Sign("SelectiveScan", args);
    inner_.SelectiveScan(args);
  }
  void SelectiveStateUpdate(const kernels::SelectiveScanArgs& args) override {
    Sign("SelectiveStateUpdate", args);
    inner_.SelectiveStateUpdate(args);
  }
  void SsdScan(const kernels::SsdScanArgs& args, kernels::Workspace& ws) override {
    Sign("SsdScan", args);
    inner_.SsdScan(args, ws);
  }
  void SsdStateUpdate(const kernels::SsdScanArgs& args) override {
    Sign("SsdStateUpdate", args);
    inner_.SsdStateUpdate(args);
  }
  void WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
               int64_t start_pos, const kernels::PagedKv& kv) override {
    Sign("WriteKv", k, ld_k, v, ld_v, tokens, start_pos, kv);
    inner_.WriteKv(k, ld_k, v, ld_v, tokens, start_pos, kv);
  }
  void WriteKvAt(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t rows,
                 float* const* const* page_tables, const int64_t* positions,
                 const kernels::PagedKv& kv) override {
    Sign("WriteKvAt", k, ld_k, v, ld_v, rows, page_tables, positions, kv);
    inner_.WriteKvAt(k, ld_k, v, ld_v, rows, page_tables, positions, kv);
  }
  void Attention(const kernels::AttentionArgs& args, kernels::Workspace& ws) override {
    Sign("Attention", args);
    inner_.Attention(args, ws);
  }
  void PartialAttention(const kernels::PartialAttentionArgs& args,
                        kernels::Workspace& ws) override {
    Sign("PartialAttention", args);
    inner_.PartialAttention(args, ws);
  }
  void SharedPrefixAttention(const kernels::SharedPrefixAttentionArgs& a,
                             kernels::Workspace& ws) override {
    Sign("SharedPrefixAttention", a.rows, a.heads, a.q, a.ld_q, a.kv, a.key_begin, a.key_end,
         a.scale, a.out, a.ld_out, a.lse, a.ld_lse);
    inner_.SharedPrefixAttention(a, ws);
  }
  void MergeAttention(std::span<const kernels::AttentionPart> parts, int64_t rows, int32_t heads,
                      int32_t head_dim, float* out, int64_t ld_out, float* lse,
                      int64_t ld_lse) override {
    Sign("MergeAttention", parts.size(), rows, heads, head_dim, out, ld_out, lse, ld_lse);
    for (const kernels::AttentionPart& part : parts) signature_.Add(part);
    inner_.MergeAttention(parts, rows, heads, head_dim, out, ld_out, lse, ld_lse);
  }

 private:
  template <typename... Args>
  void Sign(const char* op, const Args&... args) {
    calls_.emplace_back(signature_.bytes().size(), op);
    signature_.Add(static_cast<const void*>(op));
    (signature_.Add(args), ...);
  }

  kernels::Ops& inner_;
  kernels::LaunchSignature signature_;
  std::vector<std::pair<size_t, const char*>> calls_;  // where each call's bytes start
};

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
    for (int s = 0; s < count; ++s) batch.push_back({&sequences[s]->state(), prompts[s], {}, false});
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
      if (shared) ASSERT_GT(stats.hydragen_nodes, 0) << "step " << step << " shared no prefix";
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
                         ::testing::Values("jamba-tiny", "zamba2-tiny", "mamba2-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tandem::models
