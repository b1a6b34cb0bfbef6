// What a backend needs to draw one sequence's next token from its row of logits where the row
// is (Ops::ReadBackSampled), and the penalty arithmetic that the host sampler and a device's
// kernel share so that both rewrite a logit with the same operations.
// Plain structs and inline functions only: CUDA code includes this header too.
#ifndef TANDEM_KERNELS_SAMPLING_ROW_H_
#define TANDEM_KERNELS_SAMPLING_ROW_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem::kernels {

struct PenaltyParams {
  float repetition_penalty = 1.0f;  // 1 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  TANDEM_HOST_DEVICE bool active() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// A token a sequence has seen: in its prompt (generated == 0) or among its generated tokens
// (generated = how often). A row's entries name distinct tokens.
struct PenaltyToken {
  int32_t token = 0;
  int32_t generated = 0;
};

// One token's logit after the penalties:
//  - repetition (Hugging Face RepetitionPenaltyLogitsProcessor): a token of prompt or output has
//    a positive logit divided by the penalty, a negative one multiplied by it;
//  - then presence and frequency (OpenAI, vLLM): a generated token's logit loses
//    presence + frequency * count. The prompt does not count for these two.
// The penalty's multiply and add are kept apart (a volatile on the host, round-to-nearest
// intrinsics on a device) so that a compiler fusing them on one side and not the other cannot
// make the host and a device disagree.
TANDEM_HOST_DEVICE inline float PenalisedLogit(float logit, const PenaltyParams& p,
                                               int32_t generated) {
  if (p.repetition_penalty != 1.0f) {
    logit = logit > 0 ? logit / p.repetition_penalty : logit * p.repetition_penalty;
  }
  if (generated > 0 && (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)) {
#if defined(__CUDA_ARCH__)
    const float penalty = __fadd_rn(p.presence_penalty,
                                    __fmul_rn(p.frequency_penalty, static_cast<float>(generated)));
#else
    const volatile float scaled = p.frequency_penalty * static_cast<float>(generated);
    const float penalty = p.presence_penalty + scaled;
#endif
    logit -= penalty;
  }
  return logit;
}

// One row of a sampling read-back: the request's rule, and the uniform draw its generator made
// for this step (so that a seeded request draws the same stream wherever its row is sampled).
struct SamplingRow {
  bool greedy = true;  // argmax of the penalised logits; the fields below the penalties unused
  float temperature = 1.0f;
  int32_t top_k = 0;   // 0 = all tokens
  float top_p = 1.0f;  // (0, 1]
  float min_p = 0.0f;  // [0, 1]; 0 = off
  PenaltyParams penalties;
  double uniform = 0;  // [0, 1)
  // Logprobs of the raw logits (before penalties and temperature): the chosen token's, and the
  // top_logprobs most likely tokens' (at most SampledToken::kMaxTop; > 0 implies logprobs).
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // The row's tokens in the read-back's PenaltyToken table: [penalties_begin, penalties_end).
  int32_t penalties_begin = 0;
  int32_t penalties_end = 0;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// What a sampling read-back returns for a row.
struct SampledToken {
  static constexpr int32_t kMaxTop = 20;
  int32_t token = 0;
  // When the rule asked for logprobs: the chosen token's, and in top[0, min(top_logprobs, kMaxTop))
  // the most likely tokens' (descending, lower ids first among equals).
  float logprob = 0;
  TokenLogprob top[kMaxTop] = {};
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SAMPLING_ROW_H_
