// The sampling rule of kernels::RowSampler (top-k, then top-p, then min-p over the walk from the
// most likely token down, lower ids first among equals; then one draw over the candidates in id
// order) computed without sorting: each cut, and the draw, is found by binary search (over the
// weights' bit patterns, or over ids), each step one reduction over the row. That is what a GPU can
// do with a block per row, in a fixed order (so a seed gives the same token run after run, whatever
// else is in the batch).
//
// The row holds weights (exp((logit - max) / temperature) as floats, all in [0, 1], the
// largest exactly 1). Non-negative floats order as their bit patterns do, so a weight's bits are
// its sort key. Weights are summed as fixed-point integers (FixedWeight): integer sums are exact,
// so every total, and the token drawn, are the same bits whatever order a device adds them in
// and however many blocks share the row. `Row` supplies the reductions; on a device they span
// the row's threads, and all of them call them together:
//   int64_t cols() const;
//   template <class Keep>                                     // over i with keep(key_i, i):
//   uint64_t Sum(Keep keep, bool count);                      // FixedWeight(weight_i, cols), or
//                                                             // 1 when count
//   template <class Keep, class Bucket>                       // the same per bucket(key_i, i)
//   const uint64_t* BucketSums(Keep keep, bool count,         // in [0, kSearchWays): valid
//                              Bucket bucket);                // until the next call
//   template <class Keep> int32_t MaxId(Keep keep);           // of the i kept (at least one)
//
// The fixed point differs from the sorting rule's double sums by rounding, so at a boundary (a
// cumulative probability within rounding of top_p or of the draw) the token may differ from the
// sorting rule's; away from boundaries it is the same token. Counts are exact.
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

// The binary point of a row's fixed-point weights: as far left as lets `cols` weights of at most
// 1 add up within 63 bits (46 fraction bits for a 128K vocabulary, where a float weight near 1
// has 24).
TANDEM_HOST_DEVICE inline int FixedWeightBits(int64_t cols) {
  int log2_cols = 0;
  while (log2_cols < 62 && (int64_t{1} << log2_cols) < cols) ++log2_cols;
  return 63 - log2_cols;
}

// ⌈value · 2^bits⌉ for a value in [0, 1], in integer arithmetic on its bits (the same on every
// host and device). Rounding up keeps every positive value positive, as it is in the sorting
// rule's sums: a draw of uniform 0 takes the first candidate of any weight.
TANDEM_HOST_DEVICE inline uint64_t FixedWeight(float value, int bits) {
  const uint32_t key = WeightKey(value);
  const int exponent = static_cast<int>(key >> 23);
  if (exponent == 0 && (key & 0x7fffffu) == 0) return 0;
  // value = mantissa · 2^(exponent − 150): a 24-bit integer times a power of two (exponent 1
  // for subnormals, whose mantissa has no leading 1).
  const uint64_t mantissa = (key & 0x7fffffu) | (exponent != 0 ? 0x800000u : 0u);
  const int shift = (exponent != 0 ? exponent : 1) - 150 + bits;
  if (shift >= 0) return mantissa << shift;
  if (shift <= -64) return 1;
  const uint64_t whole = mantissa >> -shift;
  return whole + ((mantissa & ((uint64_t{1} << -shift) - 1)) != 0 ? 1 : 0);
}

// `fraction` of `total` (a fixed-point sum), rounded down; a fraction outside [0, 1] (or NaN) is
// taken as the nearer end.
TANDEM_HOST_DEVICE inline uint64_t FixedFraction(double fraction, uint64_t total) {
  if (!(fraction > 0.0)) return 0;
  if (fraction >= 1.0) return total;
  return static_cast<uint64_t>(fraction * static_cast<double>(total));
}

// Each step of a search splits its range into up to kSearchWays buckets and takes one pass: the
// row's tokens are summed per bucket (Row::BucketSums), which narrows the range 16-fold where a
// bisection would halve it. A 30-bit weight key takes 8 passes instead of 30.
constexpr int kSearchWays = 16;

// The largest key K in [lo, hi] such that the tokens `keep` accepts with a key >= K total at
// least `target` (given that those with a key >= lo do).
template <class Row, class Keep>
TANDEM_HOST_DEVICE uint32_t LargestKeyReaching(Row& row, Keep keep, bool count, uint64_t target,
                                               uint32_t lo, uint32_t hi) {
  while (lo < hi) {
    // Split points lo + j·step for j in [1, ways): a token's bucket is how many it reaches.
    const uint32_t width = hi - lo;
    const uint32_t ways = width + 1 < kSearchWays ? width + 1 : kSearchWays;
    const uint32_t step = width / ways > 0 ? width / ways : 1;
    const uint64_t* sums = row.BucketSums(keep, count, [&](uint32_t key, int32_t) -> int {
      if (key < lo) return 0;
      const uint32_t b = (key - lo) / step;
      return static_cast<int>(b < ways - 1 ? b : ways - 1);
    });
    // from[j] = the total of buckets j and above = that of the keys >= lo + j·step.
    uint64_t from = 0;
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
TANDEM_HOST_DEVICE int32_t LowestIdReaching(Row& row, Keep keep, bool count, uint64_t base,
                                            uint64_t target, bool strict, int32_t first,
                                            int32_t last) {
  const auto reaches = [&](uint64_t total) { return strict ? total > target : total >= target; };
  while (first < last) {
    // Chunks of `step` ids from `first`, the last chunk running on to `last`; ids below `first`
    // count with the first chunk.
    const uint32_t width = static_cast<uint32_t>(last - first) + 1;
    const uint32_t ways = width < kSearchWays ? width : kSearchWays;
    const uint32_t step = width / ways;
    const uint64_t* sums = row.BucketSums(keep, count, [&](uint32_t, int32_t id) -> int {
      if (id < first) return 0;
      const uint32_t b = static_cast<uint32_t>(id - first) / step;
      return static_cast<int>(b < ways - 1 ? b : ways - 1);
    });
    // upto = the total through chunk j = that of the ids <= first + (j+1)·step - 1.
    uint64_t upto = base;
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
TANDEM_HOST_DEVICE RankCut CutWhereTotalReaches(Row& row, Keep keep, bool count, uint64_t target) {
  // The largest key K whose tokens and those above reach the target: the token sought has key K.
  const uint32_t k = LargestKeyReaching(row, keep, count, target, 0, WeightKey(1.0f));
  const uint64_t above =
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
    top_k = CutWhereTotalReaches(row, all, /*count=*/true, static_cast<uint64_t>(rule.top_k));
  }
  const auto in_top_k = [&](uint32_t key, int32_t id) { return top_k.Before(key, id); };
  RankCut top_p;
  if (rule.top_p < 1.0f) {
    const uint64_t total = row.Sum(in_top_k, /*count=*/false);
    // At least the first token's weight (a fixed weight is at least 1): a top_p so small that
    // its share of the total rounds to 0 still keeps the most likely token, as the sorting rule
    // does, where a target of 0 would keep the lowest id of weight 1, or nothing.
    const uint64_t share = FixedFraction(static_cast<double>(rule.top_p), total);
    const uint64_t target = share > 0 ? share : 1;
    top_p = CutWhereTotalReaches(row, in_top_k, /*count=*/false, target);
  }
  // Weights are relative to the most likely token (weight 1), so min_p is the cutoff itself.
  const uint32_t min_key = WeightKey(rule.min_p);
  const auto kept = [&](uint32_t key, int32_t id) {
    return key >= min_key && top_p.Before(key, id) && top_k.Before(key, id);
  };
  const uint64_t total = row.Sum(kept, /*count=*/false);
  const uint64_t r = FixedFraction(rule.uniform, total);
  if (!(total > r)) {
    // Only rounding gets here (uniform < 1): the walk then ends on the last candidate (the highest
    // id).
    return row.MaxId(kept);
  }
  // The draw walks the candidates in id order: the lowest id at which their running total
  // exceeds r.
  return LowestIdReaching(row, kept, /*count=*/false, 0, r, /*strict=*/true, 0,
                          static_cast<int32_t>(cols - 1));
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_THRESHOLD_DRAW_H_
