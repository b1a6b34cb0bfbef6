// ReferenceOps: the pieces of a decomposed (Hydragen) attention — attention over a key range
// with its log-sum-exp, and the merge of such parts — as plain loops in double, so that tests
// can check the fast backends' decomposition against undecomposed attention.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/decode_batch.h"
#include "kernels/reference/reference_ops.h"

namespace tandem::kernels {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Row t sees keys [key_begin, key_end) ∩ [0, start_pos + t + 1) when causal.
void RangeAttention(int64_t rows, int64_t start_pos, bool causal, int32_t heads, const float* q,
                    int64_t ld_q, const PagedKv& kv, int64_t key_begin, int64_t key_end,
                    float scale, float* out, int64_t ld_out, float* lse, int64_t ld_lse) {
  const int64_t dh = kv.head_dim, pt = kv.page_tokens;
  const int32_t group = heads / kv.num_kv_heads;
  std::vector<double> scores, acc(dh);
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t end = causal ? std::min(key_end, start_pos + t + 1) : key_end;
    const int64_t n = std::max<int64_t>(0, end - key_begin);
    scores.assign(n, 0.0);
    for (int32_t h = 0; h < heads; ++h) {
      const int32_t j = h / group;
      const float* qh = q + t * ld_q + h * dh;
      float* o = out + t * ld_out + h * dh;
      if (n == 0) {
        std::fill(o, o + dh, 0.0f);
        lse[t * ld_lse + h] = -std::numeric_limits<float>::infinity();
        continue;
      }
      double max_s = kNegInf;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = key_begin + i;
        const float* key = kv.k_block(p / pt, j) + (p % pt) * dh;
        double dot = 0.0;
        for (int64_t d = 0; d < dh; ++d) dot += static_cast<double>(qh[d]) * key[d];
        scores[i] = dot * scale;
        max_s = std::max(max_s, scores[i]);
      }
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        scores[i] = std::exp(scores[i] - max_s);
        sum += scores[i];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = key_begin + i;
        const float* val = kv.v_block(p / pt, j) + (p % pt) * dh;
        for (int64_t d = 0; d < dh; ++d) acc[d] += scores[i] * val[d];
      }
      for (int64_t d = 0; d < dh; ++d) o[d] = static_cast<float>(acc[d] / sum);
      lse[t * ld_lse + h] = static_cast<float>(max_s + std::log(sum));
    }
  }
}

}  // namespace

void ReferenceOps::PartialAttention(const PartialAttentionArgs& a, Workspace& ws) {
  if (a.page_tables != nullptr) {
    for (int64_t r = 0; r < a.rows; ++r) PartialAttention(DecodeRow(a, r), ws);
    return;
  }
  RangeAttention(a.rows, a.start_pos, a.causal, a.heads, a.q, a.ld_q, a.kv, a.key_begin, a.key_end,
                 a.scale, a.out, a.ld_out, a.lse, a.ld_lse);
}

void ReferenceOps::SharedPrefixAttention(const SharedPrefixAttentionArgs& a, Workspace&) {
  RangeAttention(a.rows, 0, false, a.heads, a.q, a.ld_q, a.kv, a.key_begin, a.key_end, a.scale,
                 a.out, a.ld_out, a.lse, a.ld_lse);
}

void ReferenceOps::MergeAttention(std::span<const AttentionPart> parts, int64_t rows, int32_t heads,
                                  int32_t head_dim, float* out, int64_t ld_out, float* lse,
                                  int64_t ld_lse) {
  std::vector<double> weight(parts.size()), acc(head_dim);
  for (int64_t t = 0; t < rows; ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      double max_l = kNegInf;
      for (const AttentionPart& p : parts) {
        max_l = std::max<double>(max_l, p.lse[t * p.ld_lse + h]);
      }
      float* o = out + t * ld_out + int64_t{h} * head_dim;
      if (max_l == kNegInf) {
        std::fill(o, o + head_dim, 0.0f);
        if (lse != nullptr) lse[t * ld_lse + h] = -std::numeric_limits<float>::infinity();
        continue;
      }
      double total = 0.0;
      for (size_t i = 0; i < parts.size(); ++i) {
        weight[i] = std::exp(parts[i].lse[t * parts[i].ld_lse + h] - max_l);
        total += weight[i];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t i = 0; i < parts.size(); ++i) {
        if (weight[i] == 0.0) continue;
        const float* po = parts[i].out + t * parts[i].ld_out + int64_t{h} * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) acc[d] += weight[i] * po[d];
      }
      for (int32_t d = 0; d < head_dim; ++d) o[d] = static_cast<float>(acc[d] / total);
      if (lse != nullptr) lse[t * ld_lse + h] = static_cast<float>(max_l + std::log(total));
    }
  }
}

}  // namespace tandem::kernels
