// Runs one scheduler step on the model: every scheduled sequence's tokens in a single forward
// pass, so the linear layers of all decode rows and prefill chunks run as shared GEMMs (that is
// where continuous batching gets its throughput: decode is bound by reading the weights).
// Owns (or borrows) the compute backend and the scratch memory; one instance per engine loop
// thread. On a device backend the activations and logits are computed in the device's memory and
// the logits rows are read back to the host for the sampler.
#ifndef TANDEM_ENGINE_MODEL_RUNNER_H_
#define TANDEM_ENGINE_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/ops.h"
#include "kernels/workspace.h"
#include "models/model.h"

namespace tandem::engine {

// FAILED_PRECONDITION when `ops` cannot read the model's weights: a device backend with weights
// in host memory, or a host backend with weights placed on a device.
absl::Status CheckWeightsReachable(const models::Model& model, kernels::Ops& ops);

// What a step needs of a sequence's row of logits; the less, the less a device sends back.
enum class LogitsUse : uint8_t {
  kRow,     // the whole row, for the sampler: logits_row(i)
  kArgmax,  // only its greedy choice (greedy without penalties or logprobs): token(i)
  kSample,  // only what its sampling rule draws, and the logprobs it asks for: sampled(i)
  kNone,    // nothing: a prefill chunk that does not reach the end of its prompt
};

// The rules of the rows a step samples where the logits are (LogitsUse::kSample): one per
// logits row in batch order (a sequence with all_logits has one per token; rules of rows that
// are not kSample are unread), their penalty tokens in `seen` (SamplingRow's range).
struct StepSampling {
  std::span<const kernels::SamplingRow> rules;
  std::span<const kernels::PenaltyToken> seen;
};

class ModelRunner {
 public:
  ModelRunner(const models::Model& model, std::unique_ptr<kernels::Ops> ops,
              const models::HydragenConfig& hydragen = {});
  // Borrows `ops`, which must outlive the runner.
  ModelRunner(const models::Model& model, kernels::Ops& ops,
              const models::HydragenConfig& hydragen = {});
  ModelRunner(const ModelRunner&) = delete;  // options_ points into the object
  ModelRunner& operator=(const ModelRunner&) = delete;
  ~ModelRunner();

  // Runs `batch` and returns, per sequence and as `uses` asks (empty: every row whole), its rows
  // of logits, their argmaxes, or what its sampling rule (in `sampling`) draws, in batch order;
  // they stay valid until the next Run. A sequence has one row, after its last new token, or
  // with `all_logits` one after each of its new tokens (speculative decoding verifies a draft
  // from them); its use applies to each of its rows. When the whole batch fails (Model::Forward
  // changes no state on error) each sequence is retried alone, so one bad sequence cannot fail the
  // others. `errors` always gets one entry per sequence, saying how it fared; the result is an
  // error only when every entry is one.
  [[nodiscard]] absl::Status Run(std::span<const models::SequenceInput> batch,
                                 std::vector<absl::Status>* errors,
                                 std::span<const LogitsUse> uses = {},
                                 const StepSampling& sampling = {});
  // Sequence i's row j (0 unless it asked for all_logits).
  const float* logits_row(size_t i, size_t j = 0) const {
    return logits_.data() + (first_rows_[i] + j) * vocab_;
  }
  int32_t token(size_t i, size_t j = 0) const { return tokens_[first_rows_[i] + j]; }  // kArgmax
  const kernels::SampledToken& sampled(size_t i, size_t j = 0) const {                 // kSample
    return sampled_[first_rows_[i] + j];
  }
  size_t rows(size_t i) const { return first_rows_[i + 1] - first_rows_[i]; }
  int64_t vocab() const { return vocab_; }

  // Counts over every pass so far (Hydragen nodes attended: tests see the shared path ran).
  const models::ForwardStats& forward_stats() const { return forward_stats_; }

  const models::Model& model() const { return model_; }
  kernels::Ops& ops() { return *ops_; }
  const kernels::Ops& ops() const { return *ops_; }

 private:
  // Forward into the backend's logits buffer, then what `row_uses` asks of each row (one entry
  // per logits row) to logits_, tokens_ or sampled_ from entry first_row. `ops_failed` is set
  // when the backend reported a failed op (not a refused batch).
  absl::Status ForwardAndReadBack(std::span<const models::SequenceInput> batch,
                                  std::span<const LogitsUse> row_uses, size_t first_row,
                                  bool* ops_failed);
  // Lays out the rows of `batch` (first_rows_, row_uses_).
  void PlanRows(std::span<const models::SequenceInput> batch, std::span<const LogitsUse> uses);
  // Copies what `uses` asks of rows [0, uses.size()) at `out`, from entry first_row; returns
  // the backend's first failure or "".
  std::string ReadBackRows(const float* out, std::span<const LogitsUse> uses, size_t first_row);
  // Room for `rows` logits rows in the backend's memory (logits_ itself on the host).
  absl::StatusOr<float*> BackendLogits(size_t rows);

  const models::Model& model_;
  std::unique_ptr<kernels::Ops> owned_ops_;
  kernels::Ops* ops_;
  kernels::Workspace ws_;           // activations, in the backend's memory
  kernels::Workspace host_ws_;      // the layer graph's host tables, when ws_ is a device's
  models::ForwardOptions options_;  // Hydragen settings; stats point at forward_stats_
  models::ForwardStats forward_stats_;
  int64_t vocab_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  std::vector<kernels::SampledToken> sampled_;
  StepSampling sampling_;            // the current Run's
  std::vector<LogitsUse> all_rows_;  // uses when Run is given none
  // The current Run's rows: sequence i's are [first_rows_[i], first_rows_[i + 1]).
  std::vector<size_t> first_rows_;
  std::vector<LogitsUse> row_uses_;
  float* device_logits_ = nullptr;  // device backends only; from ops_->activation_memory()
  size_t device_logits_rows_ = 0;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_MODEL_RUNNER_H_
