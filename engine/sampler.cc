#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tandem::engine {

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  if (!p.greedy && (!std::isfinite(p.temperature) || p.temperature <= 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be a positive number when sampling, got ", p.temperature));
  }
  if (p.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", p.top_k));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", p.top_p));
  }
  return absl::OkStatus();
}

namespace {
uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix64(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.greedy) return Argmax(logits);
  const size_t vocab = logits.size();
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  // Candidates by descending logit (ties: lower id first), cut to top_k. Ordering is needed only
  // when top-k or top-p restricts the candidates; plain temperature sampling skips the sort.
  size_t keep = vocab;
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab) {
    keep = params_.top_k;
    std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), by_logit);
  } else if (params_.top_p < 1.0f) {
    std::sort(order_.begin(), order_.end(), by_logit);
  }
  // Softmax at the temperature, in double, over the candidates.
  probs_.resize(keep);
  double max_logit = logits[order_[0]];
  for (size_t i = 1; i < keep; ++i) max_logit = std::max<double>(max_logit, logits[order_[i]]);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((logits[order_[i]] - max_logit) / params_.temperature);
    total += probs_[i];
  }
  // Nucleus: the smallest prefix whose probability reaches top_p (at least one token).
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += probs_[i] / total;
      if (cumulative >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += probs_[i];
  }
  double r = rng_.Uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= probs_[i];
    if (r < 0) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace tandem::engine
