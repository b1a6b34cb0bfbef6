// The inner loop shared by CpuOps's per-row attention ops: one query token's GQA group against a
// key range of one kv head, with an online (streaming) softmax in fp32, page block by page block,
// so that each block of K and V is loaded once for the whole group.
#ifndef TANDEM_KERNELS_CPU_ATTENTION_STREAM_H_
#define TANDEM_KERNELS_CPU_ATTENTION_STREAM_H_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fast_math.h"
#include "kernels/ops.h"

namespace tandem::kernels {

// Floats of scratch StreamGroup needs for a group of `group` heads.
inline int64_t StreamGroupScratch(int32_t group, int64_t head_dim, int32_t page_tokens) {
  return int64_t{group} * head_dim + page_tokens + 2 * group;
}

// Accumulates, for each head gi of the group (query q + gi·head_dim, kv head j), the unnormalised
// Σ exp(s − max)·v into acc[gi·head_dim …], the running max into mx[gi] and Σ exp(s − max) into
// sum[gi], over keys [key_begin, key_end). `scratch` has StreamGroupScratch floats; on return
// acc = scratch, mx and sum follow the score row. An empty range leaves sum = 0, mx = −inf.
struct GroupResult {
  float* acc;
  float* mx;
  float* sum;
};

inline GroupResult StreamGroup(const float* q, int32_t group, const PagedKv& kv, int32_t j,
                               int64_t key_begin, int64_t key_end, float scale, float* scratch) {
  const int64_t dh = kv.head_dim, pt = kv.page_tokens;
  float* acc = scratch;         // [group, dh]
  float* s = acc + group * dh;  // [pt]
  float* mx = s + pt;           // running max per head
  float* sum = mx + group;      // running denominator per head
  std::fill(acc, acc + group * dh, 0.0f);
  std::fill(mx, mx + group, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + group, 0.0f);
  if (key_begin >= key_end) return {acc, mx, sum};
  for (int64_t page = key_begin / pt; page * pt < key_end; ++page) {
    const int64_t lo = std::max<int64_t>(key_begin - page * pt, 0);
    const int64_t cnt = std::min(pt, key_end - page * pt) - lo;
    const float* __restrict kb = kv.k_block(page, j) + lo * dh;
    const float* __restrict vb = kv.v_block(page, j) + lo * dh;
    for (int32_t gi = 0; gi < group; ++gi) {
      const float* __restrict qg = q + int64_t{gi} * dh;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int64_t r = 0; r < cnt; ++r) {
        const float* __restrict kr = kb + r * dh;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < dh; ++i) dot += qg[i] * kr[i];
        s[r] = dot * scale;
        block_max = std::max(block_max, s[r]);
      }
      const float new_max = std::max(mx[gi], block_max);
      const float correction = FastExp(mx[gi] - new_max);  // exp(-inf) = 0 on the first block
      mx[gi] = new_max;
      float* __restrict ag = acc + gi * dh;
      float block_sum = 0.0f;
      if (correction != 1.0f) {
        for (int64_t i = 0; i < dh; ++i) ag[i] *= correction;
      }
#pragma omp simd reduction(+ : block_sum)
      for (int64_t r = 0; r < cnt; ++r) {
        s[r] = FastExp(s[r] - new_max);
        block_sum += s[r];
      }
      for (int64_t r = 0; r < cnt; ++r) {
        const float p = s[r];
        const float* __restrict vr = vb + r * dh;
#pragma omp simd
        for (int64_t i = 0; i < dh; ++i) ag[i] += p * vr[i];
      }
      sum[gi] = sum[gi] * correction + block_sum;
    }
  }
  return {acc, mx, sum};
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_ATTENTION_STREAM_H_
