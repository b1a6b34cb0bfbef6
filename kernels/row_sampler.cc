#include "kernels/row_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "kernels/argmax.h"
#include "kernels/logprobs.h"

namespace tandem::kernels {

RowSampler::RowSampler(int64_t vocab) { Reserve(static_cast<size_t>(std::max<int64_t>(vocab, 0))); }

void RowSampler::Reserve(size_t cols) {
  if (order_.size() >= cols) return;
  order_.resize(cols);
  weight_of_.resize(cols);
  marks_.resize(cols);
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
  const auto stronger = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
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
    bool any_nan = false;
    for (float l : logits) {
      any_nan |= l != l;
      if (l > max_logit) max_logit = l;
    }
    if (any_nan) return std::nullopt;
  }
  if (!std::isfinite(max_logit)) return std::nullopt;  // no weights relative to it
  const double inv_t = 1.0 / rule.temperature;
  float* weight = weight_of_.data();
  if (sorted) {
    for (size_t i = 0; i < n; ++i) {
      weight[order_[i]] = CandidateWeight(logits[order_[i]], max_logit, inv_t);
    }
  } else {
    for (size_t i = 0; i < vocab; ++i) weight[i] = CandidateWeight(logits[i], max_logit, inv_t);
    std::iota(order_.begin(), order_.begin() + vocab, 0);
  }

  if (rule.top_p < 1.0f) {
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += weight[order_[i]];
    const double target = static_cast<double>(rule.top_p) * total;
    if (sorted) {
      n = CutWalking(n, target);
    } else {
      n = KeepHeadReaching(logits, n, target);
      sorted = true;
    }
  }

  if (rule.min_p > 0.0f) {
    // Weights are relative to the most likely token (weight 1), so the cutoff is min_p itself.
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (weight[order_[i]] >= rule.min_p) order_[kept++] = order_[i];
    }
    n = kept;
  }
  // The draw walks the candidates in id order, which a device can do without sorting them.
  if (sorted) IdOrder(n);
  return n;
}

size_t RowSampler::CutWalking(size_t n, double target) const {
  double above = 0;
  for (size_t i = 0; i < n; ++i) {
    above += weight_of_[order_[i]];
    if (above >= target) return i + 1;
  }
  return n;  // rounding kept the total short of the target: keep everything
}

size_t RowSampler::KeepHeadReaching(std::span<const float> logits, size_t n, double target) {
  const auto stronger = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const float* weight = weight_of_.data();
  int32_t* order = order_.data();
  // A confident model's nucleus is a few tokens: try the 64 most likely first.
  const size_t head = std::min<size_t>(n, 64);
  std::partial_sort(order, order + head, order + n, stronger);
  double head_mass = 0;
  for (size_t i = 0; i < head; ++i) head_mass += weight[order[i]];
  if (head_mass >= target || head == n) return CutWalking(head, target);

  // Otherwise a quickselect that carries the weight of what lies above the range: tokens in
  // [0, lo) rank above [lo, hi), which ranks above [hi, n), and [0, lo) weighs less than the
  // target. Expected O(n), where sorting a flat distribution's nucleus was O(n log n).
  size_t lo = 0;
  size_t hi = n;
  double above = 0;
  while (hi - lo > 32) {
    int32_t a = order[lo], b = order[lo + (hi - lo) / 2], c = order[hi - 1];
    if (stronger(b, a)) std::swap(a, b);
    if (stronger(c, b)) std::swap(b, c);
    if (stronger(b, a)) std::swap(a, b);
    const int32_t pivot = b;  // the median of three
    int32_t* mid =
        std::partition(order + lo, order + hi, [&](int32_t t) { return stronger(t, pivot); });
    const size_t m = static_cast<size_t>(mid - order);
    double upper = 0;
    for (size_t i = lo; i < m; ++i) upper += weight[order[i]];
    if (above + upper >= target) {
      hi = m;  // the cut is among the tokens above the pivot
      continue;
    }
    // The pivot ranks first in [m, hi): place it, so that every round consumes a token.
    above += upper;
    std::swap(*std::find(order + m, order + hi, pivot), order[m]);
    above += weight[pivot];
    if (above >= target) return m + 1;
    lo = m + 1;
  }
  std::sort(order + lo, order + hi, stronger);
  for (size_t i = lo; i < hi; ++i) {
    above += weight[order[i]];
    if (above >= target) return i + 1;
  }
  return hi;  // rounding kept the total short of the target: keep everything ranked so far
}

void RowSampler::IdOrder(size_t n) {
  if (n <= 4096) {
    std::sort(order_.begin(), order_.begin() + n);
    return;
  }
  // Many candidates: mark them and read the marks back in id order, O(vocabulary).
  for (size_t i = 0; i < n; ++i) marks_[order_[i]] = 1;
  size_t next = 0;
  for (size_t id = 0; id < marks_.size() && next < n; ++id) {
    if (marks_[id] != 0) {
      marks_[id] = 0;
      order_[next++] = static_cast<int32_t>(id);
    }
  }
}

int32_t RowSampler::Draw(std::span<const float> logits, const SamplingRow& rule) {
  const auto argmax = [&] { return ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size())); };
  if (logits.empty()) return 0;
  if (rule.greedy) return argmax();
  const std::optional<size_t> candidates = Candidates(logits, rule);
  if (!candidates) return argmax();
  const size_t n = *candidates;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += weight_of_[order_[i]];
  double r = rule.uniform * total;
  for (size_t i = 0; i < n; ++i) {
    r -= weight_of_[order_[i]];
    if (r < 0) return order_[i];
  }
  return n > 0 ? order_[n - 1] : argmax();  // rounding left r >= 0 after the last candidate
}

SampledToken RowSampler::Sample(std::span<const float> logits, const SamplingRow& rule,
                                std::span<const PenaltyToken> seen) {
  SampledToken out;
  out.token = Draw(Penalised(logits, rule.penalties, seen), rule);
  if (rule.logprobs || rule.top_logprobs > 0) {
    const int32_t n = std::clamp(rule.top_logprobs, 0, SampledToken::kMaxTop);
    out.logprob = ComputeLogprobs(logits, out.token, std::span(out.top, static_cast<size_t>(n)));
  }
  return out;
}

std::vector<std::pair<int32_t, double>> RowSampler::Distribution(std::span<const float> logits,
                                                                 const SamplingRow& rule) {
  if (logits.empty()) return {};
  const std::optional<size_t> candidates = rule.greedy ? std::nullopt : Candidates(logits, rule);
  if (!candidates) return {{ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size())), 1.0}};
  const size_t n = *candidates;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += weight_of_[order_[i]];
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(order_[i], weight_of_[order_[i]] / total);
  return out;
}

SampledToken SampleReadBackRow(RowSampler& sampler, const float* src, int64_t ld_src, int64_t cols,
                               std::span<const SamplingRow> rules,
                               std::span<const PenaltyToken> seen, size_t r) {
  const std::span<const float> row(src + static_cast<int64_t>(r) * ld_src,
                                   static_cast<size_t>(cols));
  return sampler.Sample(row, rules[r], PenaltyTokensOf(rules[r], seen));
}

}  // namespace tandem::kernels
