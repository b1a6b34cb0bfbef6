// Shared helpers for the model tests: loading the tiny reference checkpoints, owning a
// sequence's memory, and running prefill / decode through Model::Forward.
#ifndef TANDEM_TESTS_MODELS_MODEL_TEST_UTIL_H_
#define TANDEM_TESTS_MODELS_MODEL_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/ops.h"
#include "kernels/workspace.h"
#include "models/model.h"

namespace tandem::testing {

inline std::string ModelDir(const std::string& name) {
  return std::string(TANDEM_TEST_DATA) + "/models/" + name;
}
inline std::string ReferenceDir(const std::string& name) {
  return std::string(TANDEM_TEST_DATA) + "/reference/" + name;
}

// transformers' CPU path clamps Zamba2's dt to time_step_min; parity tests do the same.
inline models::LoadOptions ParityOptions(int32_t page_tokens = 16) {
  models::LoadOptions options;
  options.page_tokens = page_tokens;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  return options;
}

// A sequence whose pages and SSM block are plain heap memory, for tests that need no allocator.
class TestSequence {
 public:
  explicit TestSequence(const models::Model& model) : model_(model) {
    ssm_.assign(std::max<int64_t>(model.layout().ssm_block_floats(), 1), 0.0f);
    state_.ssm = ssm_.data();
  }
  models::SequenceState& state() { return state_; }
  void Reserve(int64_t tokens) {
    if (model_.config().num_attention_layers == 0) return;
    while (static_cast<int64_t>(state_.kv_pages.size()) < model_.layout().PagesFor(tokens)) {
      pages_.push_back(std::make_unique<float[]>(model_.layout().kv_page_floats()));
      state_.kv_pages.push_back(pages_.back().get());
    }
  }

 private:
  const models::Model& model_;
  std::vector<float> ssm_;
  std::vector<std::unique_ptr<float[]>> pages_;
  models::SequenceState state_;
};

// Runs `tokens` on `seq`; returns all rows of logits (tokens × vocab) or just the last row.
inline std::vector<float> RunTokens(const models::Model& model, kernels::Ops& ops,
                                    kernels::Workspace& ws, TestSequence& seq,
                                    std::span<const int32_t> tokens, bool all_logits,
                                    std::span<const models::SsmSnapshot> snapshots = {}) {
  seq.Reserve(seq.state().tokens + static_cast<int64_t>(tokens.size()));
  const models::SequenceInput input{&seq.state(), tokens, snapshots, all_logits};
  std::vector<float> logits(models::Model::LogitRows({&input, 1}) * model.config().vocab_size);
  const absl::Status status = model.Forward(ops, ws, {&input, 1}, logits.data());
  if (!status.ok()) {
    ADD_FAILURE() << "Forward failed: " << status;
    return {};
  }
  return logits;
}

inline float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return INFINITY;
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_MODELS_MODEL_TEST_UTIL_H_
