// Scalar definitions shared by every CPU backend, so that the reference and the fast kernels agree
// on the exact formula (thresholds, clamps, how RoPE frequencies are rounded).
#ifndef TANDEM_KERNELS_SCALAR_MATH_H_
#define TANDEM_KERNELS_SCALAR_MATH_H_

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/ops.h"

namespace tandem::kernels {

// PyTorch's softplus with beta = 1, threshold = 20: linear above the threshold.
inline float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

inline float Silu(float x) { return x / (1.0f + std::exp(-x)); }

// Exact (erf) GELU, as torch.nn.functional.gelu with approximate='none'.
inline float Gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }

// relu(x)², as torch's relu followed by square (NaN stays NaN, as torch's relu keeps it).
inline float ReluSquared(float x) { return x > 0.0f || x != x ? x * x : 0.0f; }

inline float Activate(Activation act, float x) {
  switch (act) {
    case Activation::kSilu:
      return Silu(x);
    case Activation::kGelu:
      return Gelu(x);
    case Activation::kReluSquared:
      return ReluSquared(x);
  }
  return x;
}

// Mamba-2 dt after bias and softplus, clamped to [dt_min, dt_max]; dt_max ≤ 0 or +inf means no
// upper clamp.
inline float SsdDt(float raw, float bias, float dt_min, float dt_max) {
  float dt = Softplus(raw + bias);
  if (dt < dt_min) dt = dt_min;
  if (dt_max > 0.0f && dt_max < std::numeric_limits<float>::infinity() && dt > dt_max) dt = dt_max;
  return dt;
}

// RoPE inverse frequency for pair i of a head of `head_dim`: 1 / theta^(2i/dh), all in fp32 like
// transformers' default rope init.
inline float RopeInvFreq(float theta, int32_t i, int32_t head_dim) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  return 1.0f / std::pow(theta, exponent);
}

// The rotation angle in fp32 (position · inv_freq, rounded to float) and its cos/sin evaluated
// accurately (the float result of cos of that float angle).
inline void RopeCosSin(int64_t pos, float inv_freq, float* c, float* s) {
  const float angle = static_cast<float>(pos) * inv_freq;
  *c = static_cast<float>(std::cos(static_cast<double>(angle)));
  *s = static_cast<float>(std::sin(static_cast<double>(angle)));
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SCALAR_MATH_H_
