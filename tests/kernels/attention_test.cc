// Paged KV writes and attention: CpuOps vs ReferenceOps over page sizes, GQA ratios, prefill
// continuing from a cached prefix, and decode.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::AllCloseStrided;
using testing::Rng;

// A paged cache for a model with two attention layers; the tests use layer 1 so that a wrong
// layer offset shows up.
struct Cache {
  Cache(int64_t capacity, int32_t page_tokens, int32_t kv_heads, int32_t head_dim) {
    const int64_t layer_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
    const int64_t num_pages = (capacity + page_tokens - 1) / page_tokens;
    storage.assign(num_pages, std::vector<float>(2 * layer_floats, -99.0f));
    for (auto& p : storage) pages.push_back(p.data());
    kv.pages = pages.data();
    kv.page_tokens = page_tokens;
    kv.num_kv_heads = kv_heads;
    kv.head_dim = head_dim;
    kv.layer_offset = layer_floats;
  }
  std::vector<std::vector<float>> storage;
  std::vector<float*> pages;
  PagedKv kv;
};

TEST(ReferenceOpsTest, AttentionOverOneKeyReturnsItsValue) {
  Cache cache(1, 16, 1, 4);
  const float k[] = {1, 2, 3, 4}, v[] = {5, 6, 7, 8}, q[] = {1, 0, 0, 1};
  ReferenceOps ref;
  ref.WriteKv(k, 4, v, 4, 1, 0, cache.kv);
  EXPECT_EQ(cache.kv.k_block(0, 0)[3], 4.0f);
  EXPECT_EQ(cache.kv.v_block(0, 0)[0], 5.0f);
  EXPECT_EQ(cache.storage[0][0], -99.0f);  // layer 0 untouched
  float out[4];
  AttentionArgs a;
  a.tokens = 1;
  a.heads = 1;
  a.q = q;
  a.ld_q = 4;
  a.kv = cache.kv;
  a.out = out;
  a.ld_out = 4;
  Workspace ws;
  ref.Attention(a, ws);
  EXPECT_TRUE(AllClose(out, v, 4, 0, 0));
}

TEST(ReferenceOpsTest, AttentionWeightsBySoftmaxOfScaledScores) {
  Cache cache(2, 1, 1, 2);
  const float k[] = {1, 0, 0, 1}, v[] = {1, 0, 0, 1}, q[] = {0, 0, 2, 0};
  ReferenceOps ref;
  ref.WriteKv(k, 2, v, 2, 2, 0, cache.kv);
  float out[4];
  AttentionArgs a;
  a.tokens = 2;
  a.heads = 1;
  a.q = q;
  a.ld_q = 2;
  a.kv = cache.kv;
  a.scale = 0.5f;
  a.out = out;
  a.ld_out = 2;
  Workspace ws;
  ref.Attention(a, ws);
  EXPECT_FLOAT_EQ(out[0], 1.0f);  // position 0 sees only key 0
  EXPECT_FLOAT_EQ(out[1], 0.0f);
  const float p0 = std::exp(1.0f) / (std::exp(1.0f) + 1.0f);  // scores 0.5·2 = 1 and 0
  EXPECT_NEAR(out[2], p0, 1e-6);
  EXPECT_NEAR(out[3], 1 - p0, 1e-6);
}

class AttentionTest
    : public ::testing::TestWithParam<std::tuple<int32_t, std::tuple<int, int>, int64_t>> {};

TEST_P(AttentionTest, PrefillThenDecodeMatchesReference) {
  // Plain variables, not structured bindings: the lambda below captures them, which clang
  // (the sanitizer build's compiler) accepts only from version 16.
  const int32_t page_tokens = std::get<0>(GetParam());
  const int heads = std::get<0>(std::get<1>(GetParam()));
  const int kv_heads = std::get<1>(std::get<1>(GetParam()));
  const int64_t start = std::get<2>(GetParam());
  const int32_t dh = 16;
  const int64_t prefill = 37, total = start + prefill + 3;
  Rng rng(page_tokens * 100 + heads * 10 + kv_heads + static_cast<uint32_t>(start));
  const int64_t ld_kv = int64_t{kv_heads} * dh + 1, ld_q = int64_t{heads} * dh + 2;
  auto k = rng.Uniform(total * ld_kv, -2, 2), v = rng.Uniform(total * ld_kv);
  auto q = rng.Uniform(total * ld_q, -2, 2);
  Cache ref_cache(total, page_tokens, kv_heads, dh), cpu_cache(total, page_tokens, kv_heads, dh);
  ReferenceOps ref;
  CpuOps cpu(3);
  Workspace ws;
  auto run = [&](int64_t from, int64_t count) {
    ref.WriteKv(k.data() + from * ld_kv, ld_kv, v.data() + from * ld_kv, ld_kv, count, from,
                ref_cache.kv);
    cpu.WriteKv(k.data() + from * ld_kv, ld_kv, v.data() + from * ld_kv, ld_kv, count, from,
                cpu_cache.kv);
    std::vector<float> want(count * ld_q, 1.0f), got(count * ld_q, 1.0f);
    AttentionArgs a;
    a.tokens = count;
    a.start_pos = from;
    a.heads = heads;
    a.q = q.data() + from * ld_q;
    a.ld_q = ld_q;
    a.scale = 1.0f / std::sqrt(static_cast<float>(dh));
    a.kv = ref_cache.kv;
    a.out = want.data();
    a.ld_out = ld_q;
    ws.Reset();
    ref.Attention(a, ws);
    a.kv = cpu_cache.kv;
    a.out = got.data();
    ws.Reset();
    cpu.Attention(a, ws);
    EXPECT_TRUE(AllClose(got, want, 1e-5f, 1e-5f)) << "tokens " << from << "+" << count;
  };
  if (start > 0) run(0, start);  // the cached prefix
  run(start, prefill);
  for (int64_t t = start + prefill; t < total; ++t) run(t, 1);
  for (size_t p = 0; p < ref_cache.storage.size(); ++p) {
    EXPECT_TRUE(AllClose(cpu_cache.storage[p], ref_cache.storage[p], 0, 0)) << "page " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Combine(::testing::Values(1, 16, 64),
                       ::testing::Values(std::make_tuple(4, 4), std::make_tuple(4, 2),
                                         std::make_tuple(6, 1), std::make_tuple(3, 3)),
                       ::testing::Values(0, 21)));

TEST(AttentionTest, LargeScoresStayFinite) {
  Cache cache(40, 16, 1, 8);
  Rng rng(1);
  auto k = rng.Uniform(40 * 8, -30, 30), v = rng.Uniform(40 * 8), q = rng.Uniform(40 * 8, -30, 30);
  CpuOps cpu(2);
  ReferenceOps ref;
  cpu.WriteKv(k.data(), 8, v.data(), 8, 40, 0, cache.kv);
  std::vector<float> want(40 * 8), got(40 * 8);
  AttentionArgs a;
  a.tokens = 40;
  a.heads = 1;
  a.q = q.data();
  a.ld_q = 8;
  a.kv = cache.kv;
  a.out = want.data();
  a.ld_out = 8;
  Workspace ws;
  ref.Attention(a, ws);
  a.out = got.data();
  cpu.Attention(a, ws);
  // Scores reach ~10⁴, so fp32 rounding of the scores alone moves probabilities by ~1e-4.
  EXPECT_TRUE(AllClose(got, want, 1e-3f, 1e-3f));
  for (float o : got) EXPECT_TRUE(std::isfinite(o));
}

}  // namespace
}  // namespace tandem::kernels
