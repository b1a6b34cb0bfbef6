// Log-probabilities of a row of logits, as requests that ask for logprobs get them: of the model's
// raw logits (before penalties and temperature), so they describe the model, not the sampling
// rule (what vLLM returns by default).
#ifndef TANDEM_KERNELS_LOGPROBS_H_
#define TANDEM_KERNELS_LOGPROBS_H_

#include <cstdint>
#include <span>

#include "kernels/sampling_row.h"

namespace tandem::kernels {

// log_softmax(logits)[chosen] (-inf for an id outside the row), and the `top.size()` most likely
// tokens in descending order (lowest id first on ties) written to `top`. Accumulates in double.
// O(vocab · log n).
float ComputeLogprobs(std::span<const float> logits, int32_t chosen, std::span<TokenLogprob> top);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_LOGPROBS_H_
