// CpuOps: the per-sequence pieces of a decomposed (Hydragen) attention — attention over a key
// range that also returns its log-sum-exp, and the LSE-weighted merge of such parts.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/attention_stream.h"
#include "kernels/cpu/cpu_ops.h"

namespace tandem::kernels {
namespace {

// Merges with less work than this many output floats run on the calling thread: a decode row's
// merge is a few thousand multiply-adds, cheaper than waking the pool.
constexpr int64_t kSerialMergeFloats = 64 * 1024;
// Below this many multiply-adds (rows × heads × keys × head_dim) a PartialAttention runs on the
// calling thread: a decode row's suffix of a few dozen keys takes microseconds, less than a
// pool wake-up costs on cores shared with other processes.
constexpr int64_t kSerialAttentionMacs = 256 * 1024;

}  // namespace

void CpuOps::PartialAttention(const PartialAttentionArgs& a, Workspace& ws) {
  const PagedKv& kv = a.kv;
  const int64_t dh = kv.head_dim;
  const int32_t kvh = kv.num_kv_heads, group = a.heads / kvh;
  const int64_t items = a.rows * kvh;
  // Row t's keys: [begin, end) of kv; a batch gives each row its own range and pages.
  const bool batch = a.page_tables != nullptr;
  int64_t keys = a.rows * std::max<int64_t>(0, a.key_end - a.key_begin);
  if (batch) {
    keys = 0;
    for (int64_t t = 0; t < a.rows; ++t) {
      keys += std::max<int64_t>(0, a.key_ends[t] - a.key_begins[t]);
    }
  }
  const int64_t macs = keys * a.heads * dh;
  const int64_t slots = macs < kSerialAttentionMacs ? 1 : std::min<int64_t>(items, pool_.size());
  const int64_t per_slot = StreamGroupScratch(group, dh);
  float* scratch = ws.Floats(std::max<int64_t>(slots, 1) * per_slot);
  auto item_fn = [&](int64_t slot, int64_t item) {
    const int64_t t = item / kvh;
    const int32_t j = static_cast<int32_t>(item % kvh);
    PagedKv row_kv = kv;
    int64_t begin = a.key_begin;
    int64_t end = a.causal ? std::min(a.key_end, a.start_pos + t + 1) : a.key_end;
    if (batch) {
      row_kv.pages = a.page_tables[t];
      begin = a.key_begins[t];
      end = a.key_ends[t];
    }
    const float* q = a.q + t * a.ld_q + int64_t{j} * group * dh;
    const GroupState r = StreamGroup(q, group, row_kv, j, begin, std::max(end, begin), a.scale,
                                     scratch + slot * per_slot);
    for (int32_t gi = 0; gi < group; ++gi) {
      const int64_t h = int64_t{j} * group + gi;
      float* __restrict o = a.out + t * a.ld_out + h * dh;
      if (r.sum[gi] == 0.0f) {  // empty range
        std::fill(o, o + dh, 0.0f);
        a.lse[t * a.ld_lse + h] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const float inv = 1.0f / r.sum[gi];
      for (int64_t i = 0; i < dh; ++i) o[i] = r.acc[gi * dh + i] * inv;
      a.lse[t * a.ld_lse + h] = r.max[gi] + std::log(r.sum[gi]);
    }
  };
  if (slots == 1) {
    for (int64_t item = 0; item < items; ++item) item_fn(0, item);
  } else {
    pool_.ForEach(items, item_fn);
  }
}

void CpuOps::MergeAttention(std::span<const AttentionPart> parts, int64_t rows, int32_t heads,
                            int32_t head_dim, float* out, int64_t ld_out, float* lse,
                            int64_t ld_lse) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t dh = head_dim;
  auto merge_row = [&](int64_t t) {
    for (int32_t h = 0; h < heads; ++h) {
      float max_l = kNegInf;
      for (const AttentionPart& p : parts) max_l = std::max(max_l, p.lse[t * p.ld_lse + h]);
      float* o = out + t * ld_out + int64_t{h} * dh;  // may alias parts[0].out
      if (max_l == kNegInf) {
        std::fill(o, o + dh, 0.0f);
        if (lse != nullptr) lse[t * ld_lse + h] = kNegInf;
        continue;
      }
      // Weights relative to the largest part, so that no exp overflows whatever the logits.
      float total = 0.0f;
      for (const AttentionPart& p : parts) total += std::exp(p.lse[t * p.ld_lse + h] - max_l);
      const float inv = 1.0f / total;
      // Part 0 is written first (out may alias it), the others accumulate onto it.
      for (size_t k = 0; k < parts.size(); ++k) {
        const AttentionPart& p = parts[k];
        const float w = std::exp(p.lse[t * p.ld_lse + h] - max_l) * inv;
        const float* po = p.out + t * p.ld_out + int64_t{h} * dh;
        if (k == 0) {
          if (w == 0.0f) {
            std::fill(o, o + dh, 0.0f);
          } else {
#pragma omp simd
            for (int64_t i = 0; i < dh; ++i) o[i] = w * po[i];
          }
        } else if (w != 0.0f) {
#pragma omp simd
          for (int64_t i = 0; i < dh; ++i) o[i] += w * po[i];
        }
      }
      if (lse != nullptr) lse[t * ld_lse + h] = max_l + std::log(total);
    }
  };
  const int64_t work = rows * heads * dh * static_cast<int64_t>(parts.size());
  if (work < kSerialMergeFloats || pool_.size() == 1) {
    for (int64_t t = 0; t < rows; ++t) merge_row(t);
    return;
  }
  const int64_t grain =
      std::max<int64_t>(1, kSerialMergeFloats / std::max<int64_t>(1, work / rows));
  pool_.ParallelFor(rows, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) merge_row(t);
  });
}

}  // namespace tandem::kernels
