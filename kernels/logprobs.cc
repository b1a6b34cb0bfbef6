#include "kernels/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::kernels {

float ComputeLogprobs(std::span<const float> logits, int32_t chosen, std::span<TokenLogprob> top) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float l : logits) max_logit = std::max<double>(max_logit, l);
  double total = 0;
  for (float l : logits) total += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = max_logit + std::log(total);
  const auto logprob = [&](int32_t id) { return static_cast<float>(logits[id] - log_z); };

  // A bounded insertion list: n <= 20, so this beats a heap or a partial sort over the vocab.
  const auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const size_t n = std::min(top.size(), logits.size());
  size_t filled = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (filled == n && (n == 0 || !better(id, top[n - 1].token))) continue;
    size_t pos = filled < n ? filled++ : n - 1;
    while (pos > 0 && better(id, top[pos - 1].token)) {
      top[pos] = top[pos - 1];
      --pos;
    }
    top[pos].token = id;
  }
  for (size_t i = 0; i < filled; ++i) top[i].logprob = logprob(top[i].token);
  return chosen >= 0 && static_cast<size_t>(chosen) < logits.size() ? logprob(chosen) : -INFINITY;
}

}  // namespace tandem::kernels
