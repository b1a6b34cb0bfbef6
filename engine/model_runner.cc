#include "engine/model_runner.h"

#include <algorithm>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::engine {

absl::Status CheckWeightsReachable(const models::Model& model, kernels::Ops& ops) {
  const bool weights_on_host = model.weight_placer() == nullptr;
  if (weights_on_host == ops.activations_on_host()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the ", std::string(ops.name()), " backend cannot read weights ",
      weights_on_host ? "in host memory (load the model with the device's weight placer)"
                      : "placed in device memory"));
}

ModelRunner::ModelRunner(const models::Model& model, std::unique_ptr<kernels::Ops> ops,
                         const models::HydragenConfig& hydragen)
    : ModelRunner(model, *ops, hydragen) {
  owned_ops_ = std::move(ops);
}

ModelRunner::ModelRunner(const models::Model& model, kernels::Ops& ops,
                         const models::HydragenConfig& hydragen)
    : model_(model),
      ops_(&ops),
      ws_(size_t{1} << 20, &ops.activation_memory()),
      host_ws_(ops.activations_on_host() ? 0 : size_t{1} << 16),
      vocab_(model.config().vocab_size) {
  options_.hydragen = hydragen;
  options_.stats = &forward_stats_;
  if (!ops.activations_on_host()) options_.host_scratch = &host_ws_;
}

ModelRunner::~ModelRunner() {
  if (device_logits_ != nullptr) ops_->activation_memory().Release(device_logits_);
}

absl::StatusOr<float*> ModelRunner::BackendLogits(size_t rows) {
  try {
    if (logits_.size() < rows * vocab_) logits_.resize(rows * vocab_);  // grows, then stays
    if (tokens_.size() < rows) tokens_.resize(rows);
    if (sampled_.size() < rows) sampled_.resize(rows);
  } catch (const std::bad_alloc&) {
    // A pass asking for more rows than the host can hold is refused, not the process's end.
    return absl::ResourceExhaustedError(
        absl::StrCat("no host memory for ", rows, " rows of logits of ", vocab_, " floats"));
  }
  if (ops_->activations_on_host()) return logits_.data();
  if (device_logits_rows_ < rows) {
    if (device_logits_ != nullptr) ops_->activation_memory().Release(device_logits_);
    device_logits_rows_ = 0;
    device_logits_ = static_cast<float*>(
        ops_->activation_memory().Allocate(rows * static_cast<size_t>(vocab_) * sizeof(float)));
    if (device_logits_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat(std::string(ops_->name()), ": no memory for ", rows, " rows of logits"));
    }
    device_logits_rows_ = rows;
  }
  return device_logits_;
}

std::string ModelRunner::ReadBackRows(const float* out, std::span<const LogitsUse> uses,
                                      size_t first_row) {
  // Runs of rows with the same use move in one read-back each.
  bool waited = false;
  for (size_t a = 0; a < uses.size();) {
    size_t b = a + 1;
    while (b < uses.size() && uses[b] == uses[a]) ++b;
    const float* rows = out + a * vocab_;
    std::string failure;
    if (uses[a] == LogitsUse::kRow) {
      failure = ops_->ReadBack(rows, (b - a) * vocab_, logits_.data() + (first_row + a) * vocab_);
      waited = true;
    } else if (uses[a] == LogitsUse::kArgmax) {
      failure = ops_->ReadBackArgmax(rows, vocab_, static_cast<int64_t>(b - a), vocab_,
                                     tokens_.data() + first_row + a);
      waited = true;
    } else if (uses[a] == LogitsUse::kSample) {
      failure = ops_->ReadBackSampled(rows, vocab_, vocab_,
                                      sampling_.rules.subspan(first_row + a, b - a),
                                      sampling_.seen, sampled_.data() + first_row + a);
      waited = true;
    }
    if (!failure.empty()) return failure;
    a = b;
  }
  // Nothing wanted: still the end of the pass, where a failed op is reported.
  return waited ? "" : ops_->ReadBack(out, 0, nullptr);
}

absl::Status ModelRunner::ForwardAndReadBack(std::span<const models::SequenceInput> batch,
                                             std::span<const LogitsUse> row_uses, size_t first_row,
                                             bool* ops_failed) {
  TANDEM_ASSIGN_OR_RETURN(float* out, BackendLogits(first_row + row_uses.size()));
  out += first_row * vocab_;
  absl::Status forward;
  try {
    forward = model_.Forward(*ops_, ws_, batch, out, options_);
  } catch (const std::bad_alloc&) {
    // The backend's memory could not hold this pass's activations (a Workspace found no block),
    // partway through: the states it had begun to write are as untrusted as after a failed op.
    *ops_failed = true;
    ops_->ReadBack(out, 0, nullptr);  // waits for what was issued and clears its errors
    return absl::ResourceExhaustedError(
        absl::StrCat(std::string(ops_->name()), " backend: no memory for the activations of ",
                     batch.size(), " sequences"));
  }
  if (!forward.ok()) {
    // INTERNAL: the pass failed partway (a tensor-parallel worker), the states are lost; any
    // other error is a refusal before anything changed.
    *ops_failed = absl::IsInternal(forward);
    return forward;
  }
  const std::string failure = ReadBackRows(out, row_uses, first_row);
  if (failure.empty()) return absl::OkStatus();
  *ops_failed = true;
  return absl::InternalError(absl::StrCat(std::string(ops_->name()), " backend: ", failure));
}

void ModelRunner::PlanRows(std::span<const models::SequenceInput> batch,
                           std::span<const LogitsUse> uses) {
  first_rows_.assign(1, 0);
  row_uses_.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t rows = batch[i].all_logits ? batch[i].tokens.size() : 1;
    first_rows_.push_back(first_rows_.back() + rows);
    row_uses_.insert(row_uses_.end(), rows, uses[i]);
  }
}

absl::Status ModelRunner::Run(std::span<const models::SequenceInput> batch,
                              std::vector<absl::Status>* errors,
                              std::span<const LogitsUse> uses, const StepSampling& sampling) {
  errors->assign(batch.size(), absl::OkStatus());
  auto refuse = [&](const absl::Status& refused) {
    errors->assign(batch.size(), refused);
    return refused;
  };
  if (uses.empty()) {
    all_rows_.assign(batch.size(), LogitsUse::kRow);
    uses = all_rows_;
  } else if (uses.size() != batch.size()) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
        "logits uses for ", uses.size(), " sequences, but the batch has ", batch.size())));
  }
  PlanRows(batch, uses);
  const bool samples = std::find(uses.begin(), uses.end(), LogitsUse::kSample) != uses.end();
  if (samples && sampling.rules.size() != row_uses_.size()) {
    return refuse(
        absl::InvalidArgumentError(absl::StrCat("sampling rules for ", sampling.rules.size(),
                                                " rows, but the batch has ", row_uses_.size())));
  }
  sampling_ = sampling;
  bool ops_failed = false;
  absl::Status status = ForwardAndReadBack(batch, row_uses_, 0, &ops_failed);
  if (ops_failed) {
    // The pass had begun writing the sequences' states when an op failed: none of them can be
    // trusted, or retried.
    errors->assign(batch.size(), status);
    return status;
  }
  if (status.ok() || batch.size() == 1) {
    if (!status.ok()) (*errors)[0] = status;
    return status;
  }
  // Model::Forward refused the batch before changing anything: isolate the sequences it refuses.
  bool any_ok = false;
  const std::span<const LogitsUse> row_uses(row_uses_);
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t first = first_rows_[i];
    (*errors)[i] =
        ForwardAndReadBack(batch.subspan(i, 1), row_uses.subspan(first, first_rows_[i + 1] - first),
                           first, &ops_failed);
    any_ok |= (*errors)[i].ok();
    if (ops_failed) {
      for (size_t j = i + 1; j < batch.size(); ++j) (*errors)[j] = (*errors)[i];
      return any_ok ? absl::OkStatus() : (*errors)[i];
    }
  }
  return any_ok ? absl::OkStatus() : status;
}

}  // namespace tandem::engine
