// One token's routing (MoeRouting, kernels/ops.h): its k experts and their weights from its
// router logits. One definition for every backend, host and device alike, so that they all apply
// the same rule: a different choice is not a rounding difference but a different output. (A
// device's expf may round differently from the host's by an ulp or two, which only an exact tie
// of scores within that could expose.)
// Plain inline code only: CUDA code includes this header too.
#ifndef TANDEM_KERNELS_MOE_ROUTING_H_
#define TANDEM_KERNELS_MOE_ROUTING_H_

#include <math.h>

#include <cstdint>

#include "kernels/ops.h"
#include "kernels/sampling_row.h"  // TANDEM_HOST_DEVICE

namespace tandem::kernels {

// Whether `routing` can pick top_k of `experts`: whole groups, at most kMaxMoeGroups, and enough
// experts in the allowed groups.
TANDEM_HOST_DEVICE inline bool RoutingFits(const MoeRouting& routing, int32_t experts,
                                           int32_t top_k) {
  const int32_t groups = routing.groups;
  if (groups < 1 || groups > kMaxMoeGroups || experts % groups != 0) return false;
  if (routing.top_groups < 1 || routing.top_groups > groups) return false;
  if (groups == 1) return top_k <= experts;
  return experts / groups >= 2 && top_k <= routing.top_groups * (experts / groups);
}

// Sigmoid as torch computes it in fp32: 1 / (1 + e^-x).
TANDEM_HOST_DEVICE inline float RouterSigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// The score an expert is chosen by: its logit (softmax is monotonic, so the logit ranks as its
// probability does), or its sigmoid plus its correction bias.
TANDEM_HOST_DEVICE inline float ChoiceScore(const float* logits, const MoeRouting& routing,
                                            int32_t e) {
  if (routing.score == MoeRouting::Score::kSoftmax) return logits[e];
  return RouterSigmoid(logits[e]) + (routing.bias != nullptr ? routing.bias[e] : 0.0f);
}

// Bit g set: group g may be chosen from. A group ranks by the sum of its two best choice scores;
// the top_groups best are allowed (all when there is one group).
TANDEM_HOST_DEVICE inline uint64_t AllowedGroups(const float* logits, int32_t experts,
                                                 const MoeRouting& routing) {
  const int32_t groups = routing.groups;
  if (groups <= 1) return ~uint64_t{0};
  const int32_t size = experts / groups;
  uint64_t allowed = 0;
  for (int32_t pick = 0; pick < routing.top_groups && pick < groups; ++pick) {
    int32_t best = -1;
    float best_score = 0.0f;
    for (int32_t g = 0; g < groups; ++g) {
      if ((allowed >> g) & 1) continue;
      float first = -INFINITY, second = -INFINITY;
      for (int32_t e = g * size; e < (g + 1) * size; ++e) {
        const float s = ChoiceScore(logits, routing, e);
        if (s > first) {
          second = first;
          first = s;
        } else if (s > second) {
          second = s;
        }
      }
      const float score = first + second;
      if (best < 0 || score > best_score) {
        best = g;
        best_score = score;
      }
    }
    allowed |= uint64_t{1} << best;
  }
  return allowed;
}

// Writes the token's top_k experts (descending choice score, the lower index first on ties) and
// their weights. Selection by repeated arg-max over the k already chosen, so no scratch: k and
// the expert count are small.
TANDEM_HOST_DEVICE inline void RouteToken(const float* logits, int32_t experts, int32_t top_k,
                                          const MoeRouting& routing, int32_t* chosen,
                                          float* weights) {
  const bool softmax = routing.score == MoeRouting::Score::kSoftmax;
  float max_logit = -INFINITY, sum = 0.0f;
  if (softmax) {
    for (int32_t e = 0; e < experts; ++e) max_logit = fmaxf(max_logit, logits[e]);
    for (int32_t e = 0; e < experts; ++e) sum += expf(logits[e] - max_logit);
  }
  const uint64_t allowed = AllowedGroups(logits, experts, routing);
  const int32_t group_size = routing.groups > 1 ? experts / routing.groups : experts;
  float total = 0.0f;
  for (int32_t j = 0; j < top_k; ++j) {
    int32_t best = -1;
    float best_score = 0.0f;
    for (int32_t e = 0; e < experts; ++e) {
      if (((allowed >> (e / group_size)) & 1) == 0) continue;
      bool taken = false;
      for (int32_t i = 0; i < j; ++i) taken |= chosen[i] == e;
      if (taken) continue;
      const float s = ChoiceScore(logits, routing, e);
      if (best < 0 || s > best_score) {
        best = e;
        best_score = s;
      }
    }
    chosen[j] = best;
    weights[j] = softmax ? expf(logits[best] - max_logit) / sum : RouterSigmoid(logits[best]);
    total += weights[j];
  }
  if (routing.renormalize) {
    const float denominator = softmax ? total : total + 1e-20f;
    for (int32_t j = 0; j < top_k; ++j) weights[j] /= denominator;
  }
  if (routing.scale != 1.0f) {
    for (int32_t j = 0; j < top_k; ++j) weights[j] *= routing.scale;
  }
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_MOE_ROUTING_H_
