#include "kernels/row_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "kernels/argmax.h"

namespace tandem::kernels {

RowSampler::RowSampler(int64_t vocab) { Reserve(static_cast<size_t>(std::max<int64_t>(vocab, 0))); }

void RowSampler::Reserve(size_t cols) {
  if (order_.size() >= cols) return;
  order_.resize(cols);
  weights_.resize(cols);
  heap_.reserve(cols);
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

std::optional<size_t> RowSampler::TopK(std::span<const float> logits, size_t k) {
  // A heap of the k strongest so far with the weakest on top: most tokens are turned away by
  // one comparison with it. Ids come in increasing order, so a token equal to the weakest ranks
  // below it (lower ids first) and is turned away too.
  const auto stronger = [](const std::pair<float, int32_t>& a,
                           const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  heap_.clear();
  for (size_t i = 0; i < k; ++i) {
    if (std::isnan(logits[i])) return std::nullopt;
    heap_.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  std::make_heap(heap_.begin(), heap_.end(), stronger);
  float weakest = heap_.front().first;  // kept in a register for the common case
  for (size_t i = k; i < logits.size(); ++i) {
    if (!(logits[i] <= weakest)) {  // larger, or NaN
      if (std::isnan(logits[i])) return std::nullopt;
      std::pop_heap(heap_.begin(), heap_.end(), stronger);
      heap_.back() = {logits[i], static_cast<int32_t>(i)};
      std::push_heap(heap_.begin(), heap_.end(), stronger);
      weakest = heap_.front().first;
    }
  }
  std::sort(heap_.begin(), heap_.end(), stronger);
  for (size_t i = 0; i < heap_.size(); ++i) order_[i] = heap_[i].second;
  return heap_.size();
}

std::optional<size_t> RowSampler::Candidates(std::span<const float> logits,
                                             const SamplingRow& rule) {
  const size_t vocab = logits.size();
  Reserve(vocab);
  const auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t n = vocab;
  bool sorted = false;
  float max_logit = -INFINITY;
  if (rule.top_k > 0 && static_cast<size_t>(rule.top_k) < vocab) {
    const std::optional<size_t> top = TopK(logits, static_cast<size_t>(rule.top_k));
    if (!top) return std::nullopt;
    n = *top;
    sorted = true;
    max_logit = logits[order_[0]];
  } else {
    std::iota(order_.begin(), order_.begin() + vocab, 0);
    bool any_nan = false;
    for (float l : logits) {
      any_nan |= l != l;
      if (l > max_logit) max_logit = l;
    }
    if (any_nan) return std::nullopt;
  }
  if (!std::isfinite(max_logit)) return std::nullopt;  // no weights relative to it
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
  const auto argmax = [&] { return ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size())); };
  if (logits.empty()) return 0;
  if (rule.greedy) return argmax();
  const std::optional<size_t> candidates = Candidates(logits, rule);
  if (!candidates) return argmax();
  const size_t n = *candidates;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += weights_[i];
  double r = rule.uniform * total;
  for (size_t i = 0; i < n; ++i) {
    r -= weights_[i];
    if (r < 0) return order_[i];
  }
  return n > 0 ? order_[n - 1] : argmax();  // rounding left r >= 0 after the last candidate
}

int32_t RowSampler::Sample(std::span<const float> logits, const SamplingRow& rule,
                           std::span<const PenaltyToken> seen) {
  return Draw(Penalised(logits, rule.penalties, seen), rule);
}

std::vector<std::pair<int32_t, double>> RowSampler::Distribution(std::span<const float> logits,
                                                                 const SamplingRow& rule) {
  if (logits.empty()) return {};
  const std::optional<size_t> candidates =
      rule.greedy ? std::nullopt : Candidates(logits, rule);
  if (!candidates) return {{ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size())), 1.0}};
  const size_t n = *candidates;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += weights_[i];
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(order_[i], weights_[i] / total);
  return out;
}

}  // namespace tandem::kernels
