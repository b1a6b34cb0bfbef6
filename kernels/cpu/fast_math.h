// Branch-free exp and the activations built on it, written so that loops calling them vectorise
// (the libm calls do not). Accuracy: a few ulp over the float range, exactly 0 below −87.3 and
// +inf above 88.7. The reference backend keeps std::exp; tests compare the two.
#ifndef TANDEM_KERNELS_CPU_FAST_MATH_H_
#define TANDEM_KERNELS_CPU_FAST_MATH_H_

#include <bit>
#include <cstdint>
#include <limits>

namespace tandem::kernels {

inline float FastExp(float x) {
  // exp(x) = 2^n · exp(r), n = round(x / ln 2), |r| ≤ ln2/2, exp(r) by a degree-6 polynomial.
  const float xc = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  // Round to nearest by the 1.5·2^23 trick (|x/ln2| < 2^22); unlike roundeven it vectorises.
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693145751953125f;   // ln 2 split in a high part exact in float …
  r = r - n * 1.42860682030941723212e-6f;  // … and the low remainder
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Scale by 2^n in two halves so that n = 128 (x near 88.7) does not overflow the exponent.
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n2 + 127) << 23);
  float result = p * s1 * s2;
  result = x < -87.3f ? 0.0f : result;
  result = x > 88.7f ? std::numeric_limits<float>::infinity() : result;
  return result;
}

inline float FastSilu(float x) { return x / (1.0f + FastExp(-x)); }

// Natural log of a positive, finite, normal float: exponent split, then
// log(m) = 2·atanh(s), s = (m − 1)/(m + 1), m ∈ [√½, √2), by an odd series to s⁹.
inline float FastLog(float y) {
  const int32_t bits = std::bit_cast<int32_t>(y);
  int32_t e = ((bits >> 23) & 0xff) - 127;
  float m = std::bit_cast<float>((bits & 0x7fffff) | 0x3f800000);  // [1, 2)
  const bool high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e = high ? e + 1 : e;
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  float poly = 1.0f / 9.0f;
  poly = poly * s2 + 1.0f / 7.0f;
  poly = poly * s2 + 1.0f / 5.0f;
  poly = poly * s2 + 1.0f / 3.0f;
  const float fe = static_cast<float>(e);
  return fe * 0.693145751953125f + (2.0f * s + 2.0f * s * s2 * poly) +
         fe * 1.42860682030941723212e-6f;
}

// softplus with PyTorch's threshold 20; log1p(e) = log(u)·e/(u − 1), u = 1 + e, stays accurate
// when e is tiny (Goldberg's trick).
inline float FastSoftplus(float x) {
  const float e = FastExp(x);
  const float u = 1.0f + e;
  // Every operand is computed unconditionally and merged by selects, so loops vectorise.
  const float denom = u == 1.0f ? 1.0f : u - 1.0f;
  const float lp = FastLog(u) * (e / denom);
  const float r = u == 1.0f ? e : lp;
  return x > 20.0f ? x : r;
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_FAST_MATH_H_
