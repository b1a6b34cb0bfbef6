// CpuOps: causal attention over the paged KV cache, one pass with an online (streaming) softmax
// in fp32. A task is one query token × one KV head, and serves every query head of that GQA
// group, so each page block of K and V is loaded once per group.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"

namespace tandem::kernels {

void CpuOps::Attention(const AttentionArgs& a, Workspace& ws) {
  const PagedKv& kv = a.kv;
  const int64_t dh = kv.head_dim, pt = kv.page_tokens;
  const int32_t kvh = kv.num_kv_heads, group = a.heads / kvh;
  const int64_t items = a.tokens * kvh;
  const int64_t slots = std::min<int64_t>(items, pool_.size());
  const int64_t per_slot = int64_t{group} * dh + pt + 2 * group;
  float* scratch = ws.Floats(slots * per_slot);
  pool_.ForEach(items, [&](int64_t slot, int64_t item) {
    const int64_t t = item / kvh;
    const int32_t j = static_cast<int32_t>(item % kvh);
    const int64_t keys = a.start_pos + t + 1;
    float* acc = scratch + slot * per_slot;  // [group, dh]
    float* s = acc + group * dh;             // [pt]
    float* mx = s + pt;                      // running max per head
    float* sum = mx + group;                 // running denominator per head
    std::fill(acc, acc + group * dh, 0.0f);
    std::fill(mx, mx + group, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + group, 0.0f);
    for (int64_t page = 0; page * pt < keys; ++page) {
      const int64_t cnt = std::min(pt, keys - page * pt);
      const float* __restrict kb = kv.k_block(page, j);
      const float* __restrict vb = kv.v_block(page, j);
      for (int32_t gi = 0; gi < group; ++gi) {
        const float* __restrict q = a.q + t * a.ld_q + (int64_t{j} * group + gi) * dh;
        float block_max = -std::numeric_limits<float>::infinity();
        for (int64_t r = 0; r < cnt; ++r) {
          const float* __restrict kr = kb + r * dh;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int64_t i = 0; i < dh; ++i) dot += q[i] * kr[i];
          s[r] = dot * a.scale;
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
    for (int32_t gi = 0; gi < group; ++gi) {
      float* __restrict o = a.out + t * a.ld_out + (int64_t{j} * group + gi) * dh;
      const float inv = 1.0f / sum[gi];
      for (int64_t i = 0; i < dh; ++i) o[i] = acc[gi * dh + i] * inv;
    }
  });
}

}  // namespace tandem::kernels
