#include "kernels/row_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/argmax.h"

namespace tandem::kernels {

RowSampler::RowSampler(int64_t vocab) { Reserve(static_cast<size_t>(std::max<int64_t>(vocab, 0))); }

void RowSampler::Reserve(size_t cols) {
  if (order_.size() >= cols) return;
  order_.resize(cols);
  weights_.resize(cols);
}

std::span<const float> RowSampler::Penalised(std::span<const float> logits,
                                             const PenaltyParams& penalties,
                                             std::span<const PenaltyToken> seen) {
  if (!penalties.active()) return logits;
  penalised_.resize(logits.size());  // the first penalised row sizes it, once
  std::copy(logits.begin(), logits.end(), penalised_.begin());
  for (const PenaltyToken& t : seen) {
    if (t.token < 0 || static_cast<size_t>(t.token) >= logits.size()) continue;
    penalised_[t.token] = PenalisedLogit(penalised_[t.token], penalties, t.generated);
  }
  return penalised_;
}

bool RowSampler::Drawable(std::span<const float> logits, const SamplingRow& rule) {
  if (rule.greedy) return false;
  float max_logit = -INFINITY;
  for (float l : logits) {
    if (std::isnan(l)) return false;
    max_logit = std::max(max_logit, l);
  }
  return std::isfinite(max_logit);
}

size_t RowSampler::Candidates(std::span<const float> logits, const SamplingRow& rule) {
  const size_t vocab = logits.size();
  Reserve(vocab);
  const auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::iota(order_.begin(), order_.begin() + vocab, 0);
  size_t n = vocab;
  bool sorted = false;
  if (rule.top_k > 0 && static_cast<size_t>(rule.top_k) < vocab) {
    n = rule.top_k;
    std::partial_sort(order_.begin(), order_.begin() + n, order_.begin() + vocab, by_logit);
    sorted = true;
  }
  const double max_logit =
      sorted ? logits[order_[0]] : *std::max_element(logits.begin(), logits.end());
  const double inv_t = 1.0 / rule.temperature;
  const auto weight = [&](int32_t id) { return SamplingWeight(logits[id], max_logit, inv_t); };

  if (rule.top_p < 1.0f) {
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += weight(order_[i]);
    // The nucleus is usually a small head of the distribution: sort a growing prefix instead of
    // the whole vocabulary.
    if (!sorted) {
      for (size_t m = std::min<size_t>(n, 64);; m = std::min(n, m * 8)) {
        std::partial_sort(order_.begin(), order_.begin() + m, order_.begin() + n, by_logit);
        double head = 0;
        for (size_t i = 0; i < m; ++i) head += weight(order_[i]);
        if (head / total >= rule.top_p || m == n) break;
      }
      sorted = true;
    }
    double cumulative = 0;
    size_t cut = n;
    for (size_t i = 0; i < n; ++i) {
      weights_[i] = weight(order_[i]);
      cumulative += weights_[i] / total;
      if (cumulative >= rule.top_p) {
        cut = i + 1;
        break;
      }
    }
    n = cut;
  } else {
    for (size_t i = 0; i < n; ++i) weights_[i] = weight(order_[i]);
  }

  if (rule.min_p > 0.0f) {
    // Weights are relative to the most likely token (weight 1), so the cutoff is min_p itself.
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (weights_[i] >= rule.min_p) {
        order_[kept] = order_[i];
        weights_[kept++] = weights_[i];
      }
    }
    n = kept;
  }
  if (sorted) {
    // The draw walks the candidates in id order, which a device can do without sorting them.
    // The weights follow their ids through the sort: they are the ids' own, recomputed.
    std::sort(order_.begin(), order_.begin() + n);
    for (size_t i = 0; i < n; ++i) weights_[i] = weight(order_[i]);
  }
  return n;
}

int32_t RowSampler::Draw(std::span<const float> logits, const SamplingRow& rule) {
  if (logits.empty()) return 0;
  const int32_t argmax = ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size()));
  if (!Drawable(logits, rule)) return argmax;
  const size_t n = Candidates(logits, rule);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += weights_[i];
  double r = rule.uniform * total;
  for (size_t i = 0; i < n; ++i) {
    r -= weights_[i];
    if (r < 0) return order_[i];
  }
  return n > 0 ? order_[n - 1] : argmax;  // rounding left r >= 0 after the last candidate
}

int32_t RowSampler::Sample(std::span<const float> logits, const SamplingRow& rule,
                           std::span<const PenaltyToken> seen) {
  return Draw(Penalised(logits, rule.penalties, seen), rule);
}

std::vector<std::pair<int32_t, double>> RowSampler::Distribution(std::span<const float> logits,
                                                                 const SamplingRow& rule) {
  if (logits.empty()) return {};
  if (!Drawable(logits, rule)) {
    return {{ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size())), 1.0}};
  }
  const size_t n = Candidates(logits, rule);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += weights_[i];
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(order_[i], weights_[i] / total);
  return out;
}

}  // namespace tandem::kernels
