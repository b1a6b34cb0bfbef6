// The sampling rule of kernels::RowSampler (top-k, then top-p, then min-p over the walk from the
// most likely token down, lower ids first among equals; then one draw over the candidates in id
// order) computed without sorting: each cut, and the draw, is found by binary search (over the
// weights' bit patterns, or over ids), each step one reduction over the row. That is what a GPU can
// do with a block per row, in a fixed order (so a seed gives the same token run after run, whatever
// else is in the batch).
//
// The row holds weights (exp((logit - max) / temperature) as floats, all in [0, 1], the
// largest exactly 1). Non-negative floats order as their bit patterns do, so a weight's bits are
// its sort key. `Row` supplies the reductions; on a device they are block-wide and every thread of
// the block calls them together:
//   int64_t cols() const;
//   template <class Keep> double Sum(Keep keep, bool count);  // over i with keep(key_i, i):
//                                                             // weight_i, or 1 when count
//   template <class Keep, class Bucket>                       // the same per bucket(key_i, i)
//   const double* BucketSums(Keep keep, bool count,           // in [0, kSearchWays): valid
//                            Bucket bucket);                  // until the next call
//   template <class Keep> int32_t MaxId(Keep keep);           // of the i kept (at least one)
//
// Sums are taken in whatever order the reduction has, so at a boundary (a cumulative probability
// within rounding of top_p or of the draw) the result may differ from the sorting rule's; away
// from boundaries it is the same token. Counts are exact.
#ifndef TANDEM_KERNELS_THRESHOLD_DRAW_H_
#define TANDEM_KERNELS_THRESHOLD_DRAW_H_

#include <cstdint>

#include "kernels/sampling_row.h"

namespace tandem::kernels {

// A place in the rank order (larger weight first, lower id first among equals): the tokens before
// it are those with a larger key, and those with an equal key and a lower id.
struct RankCut {
  uint32_t key = 0;
  int32_t id = INT32_MAX;  // {0, INT32_MAX}: after every token
  TANDEM_HOST_DEVICE bool Before(uint32_t token_key, int32_t token_id) const {
    return token_key > key || (token_key == key && token_id < id);
  }
};

TANDEM_HOST_DEVICE inline uint32_t WeightKey(float weight) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(weight);
#else
  return __builtin_bit_cast(uint32_t, weight);
#endif
}

// Each step of a search splits its range into up to kSearchWays buckets and takes one pass: the
// row's tokens are summed per bucket (Row::BucketSums), which narrows the range 16-fold where a
// bisection would halve it. A 30-bit weight key takes 8 passes instead of 30.
constexpr int kSearchWays = 16;

// The largest key K in [lo, hi] such that the tokens `keep` accepts with a key >= K total at
// least `target` (given that those with a key >= lo do).
template <class Row, class Keep>
TANDEM_HOST_DEVICE uint32_t LargestKeyReaching(Row& row, Keep keep, bool count, double target,
                                               uint32_t lo, uint32_t hi) {
  while (lo < hi) {
    // Split points lo + j·step for j in [1, ways): a token's bucket is how many it reaches.
    const uint32_t width = hi - lo;
    const uint32_t ways = width + 1 < kSearchWays ? width + 1 : kSearchWays;
    const uint32_t step = width / ways > 0 ? width / ways : 1;
    const double* sums = row.BucketSums(keep, count, [&](uint32_t key, int32_t) -> int {
      if (key < lo) return 0;
      const uint32_t b = (key - lo) / step;
      return static_cast<int>(b < ways - 1 ? b : ways - 1);
    });
    // from[j] = the total of buckets j and above = that of the keys >= lo + j·step.
    double from = 0;
    uint32_t found = 0;  // the largest j >= 1 that reaches, or 0
    for (uint32_t j = ways - 1; j >= 1; --j) {
      from += sums[j];
      if (from >= target) {
        found = j;
        break;
      }
    }
    if (found == 0) {
      hi = lo + step - 1;
    } else {
      lo = lo + found * step;
      if (found < ways - 1) hi = lo + step - 1;
    }
  }
  return lo;
}

// The lowest id M in [first, last] such that `base` plus the tokens `keep` accepts with an id
// <= M total at least `target` (more than it when `strict`); `last` when none does.
template <class Row, class Keep>
TANDEM_HOST_DEVICE int32_t LowestIdReaching(Row& row, Keep keep, bool count, double base,
                                            double target, bool strict, int32_t first,
                                            int32_t last) {
  const auto reaches = [&](double total) { return strict ? total > target : total >= target; };
  while (first < last) {
    // Chunks of `step` ids from `first`, the last chunk running on to `last`; ids below `first`
    // count with the first chunk.
    const uint32_t width = static_cast<uint32_t>(last - first) + 1;
    const uint32_t ways = width < kSearchWays ? width : kSearchWays;
    const uint32_t step = width / ways;
    const double* sums = row.BucketSums(keep, count, [&](uint32_t, int32_t id) -> int {
      if (id < first) return 0;
      const uint32_t b = static_cast<uint32_t>(id - first) / step;
      return static_cast<int>(b < ways - 1 ? b : ways - 1);
    });
    // upto = the total through chunk j = that of the ids <= first + (j+1)·step - 1.
    double upto = base;
    uint32_t found = ways - 1;  // the first chunk that reaches; the last when none does
    for (uint32_t j = 0; j + 1 < ways; ++j) {
      upto += sums[j];
      if (reaches(upto)) {
        found = j;
        break;
      }
    }
    const int32_t chunk_first = first + static_cast<int32_t>(found * step);
    if (found < ways - 1) last = chunk_first + static_cast<int32_t>(step) - 1;
    first = chunk_first;
  }
  return first;
}

// The cut just after the first token, in rank order among those `keep` accepts, at which the
// running total (of weights, or of tokens when `count`) reaches `target`. The caller makes sure
// the whole kept total does.
template <class Row, class Keep>
TANDEM_HOST_DEVICE RankCut CutWhereTotalReaches(Row& row, Keep keep, bool count, double target) {
  // The largest key K whose tokens and those above reach the target: the token sought has key K.
  const uint32_t k = LargestKeyReaching(row, keep, count, target, 0, WeightKey(1.0f));
  const double above =
      row.Sum([&](uint32_t key, int32_t id) { return key > k && keep(key, id); }, count);
  // Among the tokens of key K, the lowest id at which the total reaches it.
  const auto at_k = [&](uint32_t key, int32_t id) { return key == k && keep(key, id); };
  const int32_t id = LowestIdReaching(row, at_k, count, above, target, /*strict=*/false, 0,
                                      static_cast<int32_t>(row.cols() - 1));
  return RankCut{k, id + 1};
}

// The token `rule` draws from the row of weights (greedy and degenerate rows are the caller's
// business: see RowSampler).
template <class Row>
TANDEM_HOST_DEVICE int32_t DrawByThresholds(Row& row, const SamplingRow& rule) {
  const int64_t cols = row.cols();
  const auto all = [](uint32_t, int32_t) { return true; };
  RankCut top_k;
  if (rule.top_k > 0 && rule.top_k < cols) {
    top_k = CutWhereTotalReaches(row, all, /*count=*/true, static_cast<double>(rule.top_k));
  }
  const auto in_top_k = [&](uint32_t key, int32_t id) { return top_k.Before(key, id); };
  RankCut top_p;
  if (rule.top_p < 1.0f) {
    const double total = row.Sum(in_top_k, /*count=*/false);
    const double target = static_cast<double>(rule.top_p) * total;
    top_p = CutWhereTotalReaches(row, in_top_k, /*count=*/false, target);
  }
  // Weights are relative to the most likely token (weight 1), so min_p is the cutoff itself.
  const uint32_t min_key = WeightKey(rule.min_p);
  const auto kept = [&](uint32_t key, int32_t id) {
    return key >= min_key && top_p.Before(key, id) && top_k.Before(key, id);
  };
  const double total = row.Sum(kept, /*count=*/false);
  const double r = rule.uniform * total;
  if (!(total > r)) {
    // Only rounding gets here (uniform < 1): the walk then ends on the last candidate (the highest
    // id).
    return row.MaxId(kept);
  }
  // The draw walks the candidates in id order: the lowest id at which their running total
  // exceeds r.
  return LowestIdReaching(row, kept, /*count=*/false, 0.0, r, /*strict=*/true, 0,
                          static_cast<int32_t>(cols - 1));
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_THRESHOLD_DRAW_H_
