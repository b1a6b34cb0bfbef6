#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "cache/check.h"
#include "kernels/argmax.h"

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
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("min_p must be in [0, 1], got ", p.min_p));
  }
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition_penalty must be a positive number, got ", p.repetition_penalty));
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("presence_penalty must be in [-2, 2], got ", p.presence_penalty));
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frequency_penalty must be in [-2, 2], got ", p.frequency_penalty));
  }
  if (p.top_logprobs < 0 || p.top_logprobs > SampleResult::kMaxTop) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_logprobs must be in [0, ", SampleResult::kMaxTop, "], got ", p.top_logprobs));
  }
  if (p.logit_bias.size() > SamplingParams::kMaxLogitBiasTokens) {
    return absl::InvalidArgumentError(absl::StrCat("logit_bias may name at most ",
                                                   SamplingParams::kMaxLogitBiasTokens,
                                                   " tokens, got ", p.logit_bias.size()));
  }
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const auto [token, bias] = p.logit_bias[i];
    if (token < 0 || (i > 0 && token <= p.logit_bias[i - 1].first)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit_bias tokens must be distinct, non-negative and ascending, got ", token));
    }
    if (!(bias >= -SamplingParams::kMaxLogitBias && bias <= SamplingParams::kMaxLogitBias)) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias for token ", token, " must be in [-100, 100], got ", bias));
    }
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

uint64_t ChoiceSeed(uint64_t seed, int32_t index) {
  if (index == 0) return seed;
  // The index-th SplitMix64 output after `seed`, a well-mixed value for each index. Rng(seed)
  // takes the first four as its state words; the xor keeps choice 1's seed from being one.
  uint64_t x = seed + (static_cast<uint64_t>(index) - 1) * 0x9e3779b97f4a7c15ULL;
  return SplitMix64(x) ^ 0x5851f42d4c957f2dULL;
}

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
  return kernels::ArgmaxRow(logits.data(), static_cast<int64_t>(logits.size()));
}

SamplingState::SamplingState(const SamplingParams& params, std::span<const int32_t> prompt,
                             int32_t expected_new_tokens)
    : params_(params), rng_(params.seed) {
  // Counting costs time per token, so only the penalties that read the counts turn it on.
  count_prompt_ = params.repetition_penalty != 1.0f;
  count_generated_ = params.penalties().active();
  if (!count_generated_) return;
  counts_.Reserve((count_prompt_ ? prompt.size() : 0) +
                  static_cast<size_t>(std::max(expected_new_tokens, 0)));
  if (count_prompt_) {
    for (int32_t token : prompt) counts_.AddPrompt(token);
  }
}

void SamplingState::Accept(int32_t token) {
  if (count_generated_) counts_.AddGenerated(token);
}

kernels::SamplingRow SamplingParams::rule() const {
  kernels::SamplingRow row;
  row.greedy = greedy;
  row.temperature = temperature;
  row.top_k = top_k;
  row.top_p = top_p;
  row.min_p = min_p;
  row.penalties = penalties();
  row.logprobs = logprobs;
  row.top_logprobs = top_logprobs;
  return row;
}

SampleResult FromSampled(const kernels::SampledToken& sampled, const SamplingParams& params) {
  SampleResult result;
  result.token = sampled.token;
  if (params.logprobs || params.top_logprobs > 0) {
    result.logprob = sampled.logprob;
    result.num_top = std::clamp(params.top_logprobs, 0, SampleResult::kMaxTop);
    std::copy(sampled.top, sampled.top + result.num_top, result.top.begin());
  }
  return result;
}

BatchSampler::BatchSampler(int32_t vocab_size) : vocab_(vocab_size), rows_(vocab_size) {
  TANDEM_CHECK(vocab_size > 0, "BatchSampler needs a positive vocabulary size");
  // A sequence's penalty tokens are distinct tokens of the vocabulary: sized once, a step never
  // allocates for them.
  seen_.reserve(static_cast<size_t>(vocab_size));
}

std::span<const kernels::PenaltyToken> BatchSampler::Seen(const SamplingState& state) {
  seen_.clear();
  if (state.params().penalties().active()) AppendPenaltyTokens(state.counts(), &seen_);
  return seen_;
}

SampleResult BatchSampler::SampleRow(std::span<const float> logits, SamplingState& state) {
  TANDEM_CHECK(logits.size() == static_cast<size_t>(vocab_), "logits row is not vocab-sized");
  const SamplingParams& p = state.params();
  // A biased row is drawn from a copy, as SampleRowAmong draws from its allowed tokens.
  if (!p.logit_bias.empty()) return SampleRowAmong(logits, AllTokens(), state);
  kernels::SamplingRow rule = p.rule();
  // Drawn for every sampled step, used or not, so the stream advances once per step.
  if (!p.greedy) rule.uniform = state.rng().Uniform();
  const std::span<const kernels::PenaltyToken> seen = Seen(state);
  rule.penalties_end = static_cast<int32_t>(seen.size());
  const SampleResult result = FromSampled(rows_.Sample(logits, rule, seen), p);
  state.Accept(result.token);
  return result;
}

SampleResult BatchSampler::SampleRowAmong(std::span<const float> logits,
                                          std::span<const int32_t> allowed, SamplingState& state) {
  TANDEM_CHECK(logits.size() == static_cast<size_t>(vocab_), "logits row is not vocab-sized");
  TANDEM_CHECK(!allowed.empty(), "SampleRowAmong needs an allowed token");
  const SamplingParams& p = state.params();
  kernels::SamplingRow rule = p.rule();
  rule.logprobs = false;
  rule.top_logprobs = 0;
  if (!p.greedy) rule.uniform = state.rng().Uniform();
  // The allowed tokens' logits in id order, so that "lower ids first among equals" still holds,
  // and the penalty tokens renamed to their places among them.
  allowed_logits_.resize(allowed.size());
  for (size_t i = 0; i < allowed.size(); ++i) allowed_logits_[i] = logits[allowed[i]];
  for (const auto& [token, bias] : p.logit_bias) {
    const auto at = std::lower_bound(allowed.begin(), allowed.end(), token);
    if (at != allowed.end() && *at == token) allowed_logits_[at - allowed.begin()] += bias;
  }
  seen_among_.clear();
  for (const kernels::PenaltyToken& t : Seen(state)) {
    const auto at = std::lower_bound(allowed.begin(), allowed.end(), t.token);
    if (at != allowed.end() && *at == t.token) {
      seen_among_.push_back({static_cast<int32_t>(at - allowed.begin()), t.generated});
    }
  }
  rule.penalties_end = static_cast<int32_t>(seen_among_.size());
  const kernels::SampledToken drawn = rows_.Sample(allowed_logits_, rule, seen_among_);
  SampleResult result;
  result.token = allowed[static_cast<size_t>(drawn.token)];
  if (p.logprobs || p.top_logprobs > 0) {
    result.num_top = std::clamp(p.top_logprobs, 0, SampleResult::kMaxTop);
    result.logprob = kernels::ComputeLogprobs(
        logits, result.token, std::span(result.top.data(), static_cast<size_t>(result.num_top)));
  }
  state.Accept(result.token);
  return result;
}

void BatchSampler::Sample(std::span<const float> logits, std::span<SamplingState* const> states,
                          std::span<SampleResult> results) {
  TANDEM_CHECK(logits.size() == states.size() * static_cast<size_t>(vocab_) &&
                   results.size() == states.size(),
               "BatchSampler::Sample: logits, states and results disagree on the row count");
  for (size_t i = 0; i < states.size(); ++i) {
    results[i] = SampleRow(logits.subspan(i * vocab_, vocab_), *states[i]);
  }
}

std::vector<std::pair<int32_t, double>> BatchSampler::Distribution(std::span<const float> logits,
                                                                   const SamplingState& state) {
  const kernels::SamplingRow rule = state.params().rule();
  std::vector<float> biased(logits.begin(), logits.end());
  for (const auto& [token, bias] : state.params().logit_bias) {
    if (token < static_cast<int32_t>(biased.size())) biased[token] += bias;
  }
  return rows_.Distribution(rows_.Penalised(biased, rule.penalties, Seen(state)), rule);
}

std::span<const int32_t> BatchSampler::AllTokens() {
  if (all_tokens_.empty()) {
    all_tokens_.resize(static_cast<size_t>(vocab_));
    for (int32_t i = 0; i < vocab_; ++i) all_tokens_[i] = i;
  }
  return all_tokens_;
}

SampleResult Sampler::SampleWithLogprobs(std::span<const float> logits) {
  if (!batch_ || batch_->vocab_size() != static_cast<int32_t>(logits.size())) {
    batch_.emplace(static_cast<int32_t>(logits.size()));
  }
  return batch_->SampleRow(logits, state_);
}

}  // namespace tandem::engine
