#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/model_runner.h"
#include "engine/sequence_memory.h"
#include "models/status_macros.h"

namespace tandem::engine {
namespace {
double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

absl::StatusOr<GenerateResult> Generate(const models::Model& model, kernels::Ops& ops,
                                        cache::BlockAllocator& allocator,
                                        std::span<const int32_t> prompt,
                                        const GenerateOptions& options) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (options.max_new_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens must be >= 0, got ", options.max_new_tokens));
  }
  if (options.prefill_chunk <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill chunk must be positive, got ", options.prefill_chunk));
  }
  TANDEM_RETURN_IF_ERROR(ValidateSamplingParams(options.sampling));
  TANDEM_RETURN_IF_ERROR(CheckWeightsReachable(model, ops));

  const int64_t vocab = model.config().vocab_size;
  TANDEM_ASSIGN_OR_RETURN(SequenceMemory memory, SequenceMemory::Create(allocator, model));
  ModelRunner runner(model, ops);  // on a device backend it brings the logits back
  std::vector<absl::Status> errors;
  Sampler sampler(options.sampling, prompt, options.max_new_tokens);
  GenerateResult result;
  // The runner's row, valid until its next Run.
  const auto logits = [&] {
    return std::span<const float>(runner.logits_row(0), static_cast<size_t>(vocab));
  };

  // Prefill in chunks; only the last chunk's last row of logits is needed.
  auto start = std::chrono::steady_clock::now();
  for (size_t begin = 0; begin < prompt.size(); begin += options.prefill_chunk) {
    const size_t end = std::min(prompt.size(), begin + static_cast<size_t>(options.prefill_chunk));
    TANDEM_RETURN_IF_ERROR(memory.Reserve(static_cast<int64_t>(end)));
    const models::SequenceInput input{
        &memory.state(), prompt.subspan(begin, end - begin), {}, false};
    TANDEM_RETURN_IF_ERROR(runner.Run({&input, 1}, &errors));
  }
  result.prefill_seconds = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < options.max_new_tokens; ++i) {
    const int32_t token = sampler.Sample(logits());
    result.output_ids.push_back(token);
    if (options.record_logits)
      result.logits.insert(result.logits.end(), logits().begin(), logits().end());
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) !=
        options.stop_token_ids.end()) {
      result.finish = GenerateResult::Finish::kStop;
      break;
    }
    if (i + 1 == options.max_new_tokens) break;  // the last token's successor is not needed
    TANDEM_RETURN_IF_ERROR(memory.Reserve(memory.state().tokens + 1));
    const models::SequenceInput input{&memory.state(), {&token, 1}, {}, false};
    TANDEM_RETURN_IF_ERROR(runner.Run({&input, 1}, &errors));
  }
  result.decode_seconds = SecondsSince(start);
  return result;
}

}  // namespace tandem::engine
