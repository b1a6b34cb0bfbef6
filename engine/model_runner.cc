#include "engine/model_runner.h"

#include <utility>

namespace tandem::engine {

ModelRunner::ModelRunner(const models::Model& model, std::unique_ptr<kernels::Ops> ops,
                         const models::HydragenConfig& hydragen)
    : model_(model), ops_(std::move(ops)), vocab_(model.config().vocab_size) {
  options_.hydragen = hydragen;
  options_.stats = &forward_stats_;
}

absl::Status ModelRunner::Run(std::span<const models::SequenceInput> batch,
                              std::vector<absl::Status>* errors) {
  errors->assign(batch.size(), absl::OkStatus());
  for (const models::SequenceInput& input : batch) {
    // One logits row per sequence: the scheduler samples only after a sequence's last token.
    if (input.all_logits) {
      const absl::Status refused = absl::InvalidArgumentError("the runner returns last rows only");
      errors->assign(batch.size(), refused);
      return refused;
    }
  }
  const size_t rows = batch.size() * static_cast<size_t>(vocab_);
  if (logits_.size() < rows) logits_.resize(rows);  // grows to the largest batch, then stays
  absl::Status status = model_.Forward(*ops_, ws_, batch, logits_.data(), options_);
  if (status.ok() || batch.size() == 1) {
    if (!status.ok()) (*errors)[0] = status;
    return status;
  }
  // Isolate the failing sequences.
  bool any_ok = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    (*errors)[i] =
        model_.Forward(*ops_, ws_, batch.subspan(i, 1), logits_.data() + i * vocab_, options_);
    any_ok |= (*errors)[i].ok();
  }
  return any_ok ? absl::OkStatus() : status;
}

}  // namespace tandem::engine
