// Single-sequence generation: prefill the prompt in chunks, then decode token by token until a
// stop token or the token limit. It is what `tandem generate` runs; the continuous-batching
// scheduler (a later component) runs many sequences through the same Model::Forward.
#ifndef TANDEM_ENGINE_GENERATOR_H_
#define TANDEM_ENGINE_GENERATOR_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/block_allocator.h"
#include "engine/sampler.h"
#include "kernels/ops.h"
#include "models/model.h"

namespace tandem::engine {

struct GenerateOptions {
  int32_t max_new_tokens = 16;
  SamplingParams sampling;
  int64_t prefill_chunk = 512;          // tokens per prefill step
  std::vector<int32_t> stop_token_ids;  // generation ends after emitting one of these
  bool record_logits = false;           // keep the logits row each output token was chosen from
};

struct GenerateResult {
  std::vector<int32_t> output_ids;
  std::vector<float> logits;  // output_ids.size() × vocab when record_logits
  enum class Finish { kLength, kStop } finish = Finish::kLength;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

absl::StatusOr<GenerateResult> Generate(const models::Model& model, kernels::Ops& ops,
                                        cache::BlockAllocator& allocator,
                                        std::span<const int32_t> prompt,
                                        const GenerateOptions& options);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_GENERATOR_H_
