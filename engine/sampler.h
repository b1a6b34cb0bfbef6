// Chooses the next token of each sequence from its row of logits.
//
// Per row, in this order (the order of Hugging Face's logits processors):
//   0. OpenAI's logit_bias: a fixed amount added to chosen tokens' logits;
//   1. penalties on those logits: repetition (prompt + generated), then presence and frequency
//      (generated only) — see logits_processors.h;
//   2. greedy: argmax of the penalised logits, lowest id on ties; otherwise
//   3. softmax at `temperature`, cut to the top_k most likely, then to the smallest prefix whose
//      probability reaches top_p, then to the tokens with probability >= min_p × the largest,
//      and one draw from what is left (kernels::RowSampler, the rule every backend's sampling
//      read-back follows, so a step may sample where the logits are).
// Each sequence owns its SamplingState (generator and token counts), so a seeded request gets
// the same tokens from the same logits whatever else shares its batch.
// Logprobs, when asked for, are log_softmax of the model's raw logits (before penalties and
// temperature): they describe the model, not the sampling rule (what vLLM returns by default).
#ifndef TANDEM_ENGINE_SAMPLER_H_
#define TANDEM_ENGINE_SAMPLER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/logits_processors.h"
#include "kernels/row_sampler.h"
#include "kernels/sampling_row.h"

namespace tandem::engine {

struct SamplingParams {
  bool greedy = true;
  float temperature = 1.0f;         // > 0 when sampling; ignored when greedy
  int32_t top_k = 0;                // 0 = all tokens
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  // The generator's seed. Requests that give none should get a random one from the server:
  // the default 0 makes every such request draw the same stream.
  uint64_t seed = 0;
  bool logprobs = false;     // report the chosen token's logprob
  int32_t top_logprobs = 0;  // and the n most likely tokens' (0..20; > 0 implies logprobs)
  // (token, amount) pairs, ascending unique tokens, amounts in [-kMaxLogitBias, kMaxLogitBias]
  // added to those tokens' logits before anything else: -100 all but bans a token, +100 all but
  // forces it. Applied on the host (a row with a bias is read back whole).
  std::vector<std::pair<int32_t, float>> logit_bias;
  static constexpr float kMaxLogitBias = 100.0f;
  static constexpr size_t kMaxLogitBiasTokens = 300;  // OpenAI's limit

  PenaltyParams penalties() const {
    return {repetition_penalty, presence_penalty, frequency_penalty};
  }
  // The rule as backends take it (logprobs included), with no draw yet (SamplingRow::uniform 0).
  kernels::SamplingRow rule() const;
  // The next token is the argmax of the raw logits and nothing else is read from them, so the
  // backend may pick it where the logits are (ModelRunner's LogitsUse::kArgmax).
  bool argmax_only() const {
    return greedy && !penalties().active() && !logprobs && top_logprobs == 0 && logit_bias.empty();
  }
};

// INVALID_ARGUMENT naming the field and the value, e.g. "top_p must be in (0, 1], got 1.5".
// (logit_bias's tokens are checked against the vocabulary where it is known.)
absl::Status ValidateSamplingParams(const SamplingParams& params);

// The seed of choice `index` of a request seeded with `seed` (Engine::SubmitChoices): choice 0
// keeps the request's seed, so that asking for one choice or several gives the same first
// answer; the others get the seed and the index mixed (SplitMix64's output function), so that
// no two choices' generators start from overlapping states.
uint64_t ChoiceSeed(uint64_t seed, int32_t index);

// A small, fast, portable generator (xoshiro256**) so that a seed means the same stream on
// every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  double Uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

int32_t Argmax(std::span<const float> logits);  // lowest id on ties

// What one sequence carries from step to step. Create it once per request (after validation) and
// keep it across preemptions; BatchSampler::Sample records each sampled token in it.
class SamplingState {
 public:
  // `prompt` feeds the repetition penalty. `expected_new_tokens` sizes the token counts so that
  // steps up to that many generated tokens allocate nothing.
  explicit SamplingState(const SamplingParams& params, std::span<const int32_t> prompt = {},
                         int32_t expected_new_tokens = 0);

  const SamplingParams& params() const { return params_; }
  // Only what the active penalties read: empty without penalties, no prompt tokens without a
  // repetition penalty.
  const TokenCounts& counts() const { return counts_; }
  // Counts a generated token (done by the samplers; for tokens forced by other means).
  void Accept(int32_t token);
  Rng& rng() { return rng_; }

 private:
  SamplingParams params_;
  Rng rng_;
  TokenCounts counts_;
  bool count_prompt_ = false;
  bool count_generated_ = false;
};

struct SampleResult {
  static constexpr int32_t kMaxTop = kernels::SampledToken::kMaxTop;
  int32_t token = 0;
  // When params.logprobs or top_logprobs > 0: the chosen token's logprob, and the top_logprobs
  // most likely tokens (descending, lowest id first on ties) in top[0, num_top).
  float logprob = 0;
  int32_t num_top = 0;
  std::array<TopLogprob, kMaxTop> top{};
};

// A backend's sampling read-back of a row as the sampler reports it (the logprobs `params` asked
// for copied over).
SampleResult FromSampled(const kernels::SampledToken& sampled, const SamplingParams& params);

// Samples the rows of a [rows × vocab] logits matrix, each with its own state. Scratch buffers
// are sized once for the vocabulary and reused, so a step allocates nothing. Not thread-safe:
// one per thread that samples.
class BatchSampler {
 public:
  explicit BatchSampler(int32_t vocab_size);

  int32_t vocab_size() const { return vocab_; }

  // logits.size() == states.size() × vocab_size(), results.size() == states.size().
  void Sample(std::span<const float> logits, std::span<SamplingState* const> states,
              std::span<SampleResult> results);
  SampleResult SampleRow(std::span<const float> logits, SamplingState& state);
  // As SampleRow, choosing only among `allowed` (ascending ids, non-empty; structured output):
  // the rule runs on the allowed tokens' logits alone, so top-k, top-p and min-p rank only them,
  // and a disallowed token can never be drawn. Logprobs are still those of the whole raw row.
  SampleResult SampleRowAmong(std::span<const float> logits, std::span<const int32_t> allowed,
                              SamplingState& state);

  // The distribution the row would be drawn from (after penalties, temperature, top-k, top-p and
  // min-p), as (token, probability) pairs; the greedy rule gives its argmax with probability 1.
  // For tests and debugging; allocates.
  std::vector<std::pair<int32_t, double>> Distribution(std::span<const float> logits,
                                                       const SamplingState& state);

 private:
  // The state's penalty tokens as kernels::RowSampler takes them (none without penalties).
  std::span<const kernels::PenaltyToken> Seen(const SamplingState& state);
  // Every token id, ascending: the allowed set of a biased row without a grammar.
  std::span<const int32_t> AllTokens();

  int32_t vocab_;
  std::vector<kernels::PenaltyToken> seen_;
  std::vector<kernels::PenaltyToken> seen_among_;  // seen_ as indices into the allowed tokens
  std::vector<float> allowed_logits_;
  std::vector<int32_t> all_tokens_;
  kernels::RowSampler rows_;
};

// One sequence's sampler: a SamplingState with its own BatchSampler scratch (sized on the first
// call). Convenient for single-sequence generation; a batch should share one BatchSampler.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params, std::span<const int32_t> prompt = {},
                   int32_t expected_new_tokens = 0)
      : state_(params, prompt, expected_new_tokens) {}
  // logits: one row of `vocab` values.
  int32_t Sample(std::span<const float> logits) { return SampleWithLogprobs(logits).token; }
  SampleResult SampleWithLogprobs(std::span<const float> logits);
  const SamplingState& state() const { return state_; }

 private:
  SamplingState state_;
  std::optional<BatchSampler> batch_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_SAMPLER_H_
