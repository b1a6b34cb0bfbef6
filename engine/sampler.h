// Chooses the next token from a row of logits: greedy (argmax, lowest id on ties), or sampling
// with temperature, top-k and top-p from a per-request seeded generator (same seed, same tokens).
#ifndef TANDEM_ENGINE_SAMPLER_H_
#define TANDEM_ENGINE_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace tandem::engine {

struct SamplingParams {
  bool greedy = true;
  float temperature = 1.0f;  // > 0 when sampling
  int32_t top_k = 0;         // 0 = all tokens
  float top_p = 1.0f;        // (0, 1]
  uint64_t seed = 0;
};

// INVALID_ARGUMENT naming the parameter: temperature <= 0 or not finite when sampling, top_k < 0,
// top_p outside (0, 1].
absl::Status ValidateSamplingParams(const SamplingParams& params);

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

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}
  // logits: one row of `vocab` values.
  int32_t Sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  Rng rng_;
  std::vector<int32_t> order_;  // reused between calls: no allocation per token
  std::vector<double> probs_;
};

int32_t Argmax(std::span<const float> logits);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_SAMPLER_H_
