// Hydragen's decomposition (docs/ARCHITECTURE.md, "Hydragen") at the op level: shared-prefix
// attention of many decode rows + each sequence's own suffix attention, merged by log-sum-exp,
// equals plain paged attention of each sequence, on both backends; also the edge cases of the merge
// (empty parts, huge logits, chaining) and hierarchical (tree) sharing. The CPU backend's prefix
// attention runs with each of its implementations (the AVX-512 kernel and the portable OpenBLAS
// one).
#include "kernels/cpu/hydragen_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"
#include "tests/kernels/paged_decode_batch.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::DecodeBatch;
using testing::PagePool;
using testing::PlainAttention;
using testing::Rng;
using testing::Shape;
using testing::SharedPrefixBatch;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A level of the sharing tree: rows [first, first + count) of the batch share keys [begin, end).
struct SharedLevel {
  int64_t first, count, begin, end;
};

// Hydragen: each level attended once by all its rows, each sequence's suffix [suffix_begin[i],
// pos[i] + 1) on its own, everything merged per sequence.
std::vector<float> HydragenAttention(Ops& ops, const PagePool& pool, const DecodeBatch& b,
                                     const Shape& s, float scale,
                                     const std::vector<SharedLevel>& levels,
                                     const std::vector<int64_t>& suffix_begin) {
  const int64_t width = int64_t{s.heads} * s.head_dim, rows = b.pos.size();
  Workspace ws;
  std::vector<std::vector<float>> level_out, level_lse;
  for (const SharedLevel& l : levels) {
    level_out.emplace_back(l.count * width, 7.0f);
    level_lse.emplace_back(l.count * s.heads, 7.0f);
    SharedPrefixAttentionArgs a;
    a.rows = l.count;
    a.heads = s.heads;
    a.q = b.q.data() + l.first * width;
    a.ld_q = width;
    a.kv = pool.View(b.tables[l.first]);
    a.key_begin = l.begin;
    a.key_end = l.end;
    a.scale = scale;
    a.out = level_out.back().data();
    a.ld_out = width;
    a.lse = level_lse.back().data();
    a.ld_lse = s.heads;
    ws.Reset();
    ops.SharedPrefixAttention(a, ws);
  }
  std::vector<float> out(rows * width, 7.0f), suffix(width), suffix_lse(s.heads);
  for (int64_t i = 0; i < rows; ++i) {
    PartialAttentionArgs a;
    a.rows = 1;
    a.heads = s.heads;
    a.q = b.q.data() + i * width;
    a.ld_q = width;
    a.kv = pool.View(b.tables[i]);
    a.key_begin = suffix_begin[i];
    a.key_end = b.pos[i] + 1;
    a.scale = scale;
    a.out = suffix.data();
    a.ld_out = width;
    a.lse = suffix_lse.data();
    a.ld_lse = s.heads;
    ws.Reset();
    ops.PartialAttention(a, ws);
    std::vector<AttentionPart> parts;
    for (size_t l = 0; l < levels.size(); ++l) {
      const int64_t r = i - levels[l].first;
      if (r < 0 || r >= levels[l].count) continue;
      parts.push_back(
          {level_out[l].data() + r * width, width, level_lse[l].data() + r * s.heads, s.heads});
    }
    parts.push_back({suffix.data(), width, suffix_lse.data(), s.heads});
    ops.MergeAttention(parts, 1, s.heads, s.head_dim, out.data() + i * width, width, nullptr, 0);
  }
  return out;
}

// CpuOps whose SharedPrefixAttention runs one given implementation (the other ops are CpuOps's).
class CpuOpsWith : public CpuOps {
 public:
  CpuOpsWith(SharedPrefixImpl impl, int threads) : CpuOps(threads), impl_(impl), pool_(threads) {}
  void SharedPrefixAttention(const SharedPrefixAttentionArgs& a, Workspace& ws) override {
    SharedPrefixAttentionWith(impl_, pool_, a, ws);
  }

 private:
  SharedPrefixImpl impl_;
  ThreadPool pool_;
};

// "reference", "cpu" (the implementation CpuOps picks), "cpu_blas", "cpu_avx512".
const char* const kBackends[] = {"reference", "cpu", "cpu_blas", "cpu_avx512"};

// Whether this machine runs the backend (the AVX-512 kernel needs the CPU to have it).
bool Available(const std::string& name) {
  return name != "cpu_avx512" || SharedPrefixImplSupported(SharedPrefixImpl::kAvx512);
}

std::unique_ptr<Ops> Backend(const std::string& name) {
  if (name == "reference") return std::make_unique<ReferenceOps>();
  if (name == "cpu_blas") return std::make_unique<CpuOpsWith>(SharedPrefixImpl::kBlas, 3);
  if (name == "cpu_avx512") return std::make_unique<CpuOpsWith>(SharedPrefixImpl::kAvx512, 3);
  return std::make_unique<CpuOps>(3);
}

// Reference: every part and the merge accumulate in double and round once to fp32, so only a
// few ulp separate the decomposition from plain attention. CpuOps: fp32 GEMM sums over head_dim
// and over up to ~1300 keys, FastExp (a few ulp) and an fp32 LSE; outputs are O(1) averages of
// values in [-1, 1], and the observed error stays below ~2e-6, so 2e-5 leaves margin without
// hiding a wrong weight (a mis-merged part moves outputs by ~1e-2).
float Tolerance(const std::string& backend) { return backend == "reference" ? 2e-6f : 2e-5f; }

class HydragenTest
    : public ::testing::TestWithParam<std::tuple<std::string, Shape, int32_t, int64_t>> {};

TEST_P(HydragenTest, PrefixPlusSuffixEqualsPlainAttention) {
  const auto [backend, shape, page_tokens, batch] = GetParam();
  if (!Available(backend)) GTEST_SKIP() << "this CPU has no AVX-512";
  auto ops = Backend(backend);
  ReferenceOps ref;
  PagePool pool(page_tokens, shape.kv_heads, shape.head_dim, 11 + batch + page_tokens);
  Rng rng(5 + batch);
  // Suffixes of 1 (only the decode token), of a page and a bit, and not a multiple of the page.
  std::vector<int64_t> suffix;
  for (int64_t i = 0; i < batch; ++i) suffix.push_back(1 + (i * 7) % (2 * page_tokens + 3));
  const int64_t prefix_pages = 3;
  const DecodeBatch b = SharedPrefixBatch(pool, shape, prefix_pages, suffix, rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const int64_t prefix_end = prefix_pages * page_tokens;
  const std::vector<float> got =
      HydragenAttention(*ops, pool, b, shape, scale, {{0, batch, 0, prefix_end}},
                        std::vector<int64_t>(batch, prefix_end));
  const std::vector<float> want = PlainAttention(ref, pool, b, shape, scale);
  const float tol = Tolerance(backend);
  EXPECT_TRUE(AllClose(got, want, tol, tol));
  EXPECT_TRUE(AllClose(got, PlainAttention(*ops, pool, b, shape, scale), tol, tol));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, HydragenTest,
    ::testing::Combine(::testing::ValuesIn(std::vector<std::string>(std::begin(kBackends),
                                                                    std::end(kBackends))),
                       ::testing::Values(Shape{4, 4, 16}, Shape{8, 2, 32}, Shape{6, 1, 8}),
                       ::testing::Values(16, 5), ::testing::Values(1, 2, 7, 33)),
    [](const auto& info) {
      const Shape& s = std::get<1>(info.param);
      return std::get<0>(info.param) + "_h" + std::to_string(s.heads) + "kv" +
             std::to_string(s.kv_heads) + "d" + std::to_string(s.head_dim) + "_page" +
             std::to_string(std::get<2>(info.param)) + "_batch" +
             std::to_string(std::get<3>(info.param));
    });

// Long prefixes and many rows take the fast backend's other paths: several key chunks, key
// splits (one kv head cannot keep three threads busy), and several row blocks (70 × 4 rows).
TEST(HydragenTest, LongPrefixAndManyRowsOnCpu) {
  ReferenceOps ref;
  for (const std::string backend : {"cpu_blas", "cpu_avx512"}) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto cpu = Backend(backend);
    for (const auto& [shape, batch, prefix_pages] :
         {std::tuple{Shape{4, 1, 32}, int64_t{3}, int64_t{80}},
          std::tuple{Shape{8, 2, 16}, int64_t{70}, int64_t{9}}}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      PagePool pool(16, shape.kv_heads, shape.head_dim, 3);
      Rng rng(4);
      std::vector<int64_t> suffix;
      for (int64_t i = 0; i < batch; ++i) suffix.push_back(1 + i % 20);
      const DecodeBatch b = SharedPrefixBatch(pool, shape, prefix_pages, suffix, rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
      const int64_t end = prefix_pages * 16;
      const std::vector<float> got = HydragenAttention(
          *cpu, pool, b, shape, scale, {{0, batch, 0, end}}, std::vector<int64_t>(batch, end));
      EXPECT_TRUE(AllClose(got, PlainAttention(ref, pool, b, shape, scale), 2e-5f, 2e-5f));
    }
  }
}

// SharedPrefixAttention alone, out and lse against the reference backend, on shapes that take
// every edge of both CPU implementations: key ranges that start and end inside a page (8-key
// tiles copied instead of read in place, a ragged last tile), pages of 5 and 8 tokens, head
// dims that are not a multiple of 8 or 16, head rows that are not a multiple of 16 (padded
// vector lanes) or exceed one 256-row block, several 128-key chunks and key splits.
TEST(HydragenTest, SharedPrefixKernelsMatchReferenceOnRaggedShapes) {
  ReferenceOps ref;
  struct Case {
    Shape shape;
    int32_t page_tokens;
    int64_t rows, key_begin, key_end;
  };
  const Case cases[] = {
      {{4, 1, 12}, 16, 1, 0, 1},       // one key, one row
      {{4, 1, 12}, 5, 3, 3, 10},       // 7 keys from inside a 5-token page
      {{8, 2, 20}, 8, 5, 4, 301},      // ragged everything, three chunks
      {{6, 3, 8}, 16, 9, 16, 1200},    // key splits
      {{8, 2, 128}, 16, 70, 0, 1536},  // 280 head rows: two row blocks; splits
      {{32, 8, 128}, 16, 17, 0, 700},  // the benchmark's head shape, 68 head rows
      {{4, 2, 33}, 7, 2, 5, 600},      // odd head dim, 7-token pages
  };
  for (const std::string backend : {"cpu_blas", "cpu_avx512"}) {
    if (!Available(backend)) continue;
    auto cpu = Backend(backend);
    for (const Case& c : cases) {
      SCOPED_TRACE(backend + " d" + std::to_string(c.shape.head_dim) + " page" +
                   std::to_string(c.page_tokens) + " rows" + std::to_string(c.rows) + " keys " +
                   std::to_string(c.key_begin) + ".." + std::to_string(c.key_end));
      PagePool pool(c.page_tokens, c.shape.kv_heads, c.shape.head_dim, 50);
      const std::vector<float*> table =
          pool.NewPages((c.key_end + c.page_tokens - 1) / c.page_tokens);
      Rng rng(51);
      const int64_t width = int64_t{c.shape.heads} * c.shape.head_dim;
      // Query rows further apart than a row (ld_q > width), as in a fused QKV buffer.
      const int64_t ld_q = width + 3;
      const std::vector<float> q = rng.Uniform(c.rows * ld_q);
      auto run = [&](Ops& ops, std::vector<float>& out, std::vector<float>& lse) {
        out.assign(c.rows * width, 7.0f);
        lse.assign(c.rows * c.shape.heads, 7.0f);
        SharedPrefixAttentionArgs a;
        a.rows = c.rows;
        a.heads = c.shape.heads;
        a.q = q.data();
        a.ld_q = ld_q;
        a.kv = pool.View(table);
        a.key_begin = c.key_begin;
        a.key_end = c.key_end;
        a.scale = 1.0f / std::sqrt(static_cast<float>(c.shape.head_dim));
        a.out = out.data();
        a.ld_out = width;
        a.lse = lse.data();
        a.ld_lse = c.shape.heads;
        Workspace ws;
        ops.SharedPrefixAttention(a, ws);
      };
      std::vector<float> got, got_lse, want, want_lse;
      run(*cpu, got, got_lse);
      run(ref, want, want_lse);
      EXPECT_TRUE(AllClose(got, want, 2e-5f, 2e-5f));
      EXPECT_TRUE(AllClose(got_lse, want_lse, 2e-5f, 2e-6f));
    }
  }
}

// The prefix covers every key and the suffix part is empty (lse = −inf): the merge must return
// the prefix part unchanged, with no NaN from exp(−inf − −inf).
TEST(HydragenTest, EmptySuffixLeavesPrefixAttention) {
  for (const std::string backend : kBackends) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto ops = Backend(backend);
    ReferenceOps ref;
    const Shape shape{8, 2, 16};
    PagePool pool(16, shape.kv_heads, shape.head_dim, 9);
    Rng rng(10);
    DecodeBatch b = SharedPrefixBatch(pool, shape, 2, {1, 1, 1}, rng);
    // Query positions at the last key of the shared pages: all keys are in the prefix.
    for (auto& t : b.tables) t.resize(2);
    for (auto& p : b.pos) p = 31;
    const std::vector<float> got =
        HydragenAttention(*ops, pool, b, shape, 0.25f, {{0, 3, 0, 32}}, {32, 32, 32});
    EXPECT_TRUE(AllClose(got, PlainAttention(ref, pool, b, shape, 0.25f), 2e-5f, 2e-5f));
  }
}

TEST(HydragenTest, EmptyRangeGivesZeroAndMinusInfinity) {
  for (const std::string backend : kBackends) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto ops = Backend(backend);
    PagePool pool(16, 2, 8, 1);
    const std::vector<float*> table = pool.NewPages(1);
    std::vector<float> q(2 * 32, 1.0f), out(2 * 32, 7.0f), lse(2 * 4, 7.0f);
    Workspace ws;
    PartialAttentionArgs a;
    a.rows = 2;
    a.heads = 4;
    a.q = q.data();
    a.ld_q = 32;
    a.kv = pool.View(table);
    a.key_begin = 5;
    a.key_end = 5;
    a.out = out.data();
    a.ld_out = 32;
    a.lse = lse.data();
    a.ld_lse = 4;
    ops->PartialAttention(a, ws);
    for (float o : out) EXPECT_EQ(o, 0.0f);
    for (float l : lse) EXPECT_EQ(l, kNegInf);
    SharedPrefixAttentionArgs s;
    s.rows = 2;
    s.heads = 4;
    s.q = q.data();
    s.ld_q = 32;
    s.kv = a.kv;
    s.key_begin = s.key_end = 16;
    s.out = out.data();
    s.ld_out = 32;
    s.lse = lse.data();
    s.ld_lse = 4;
    std::fill(out.begin(), out.end(), 7.0f);
    ops->SharedPrefixAttention(s, ws);
    for (float o : out) EXPECT_EQ(o, 0.0f);
    for (float l : lse) EXPECT_EQ(l, kNegInf);
  }
}

// lse is the log-sum-exp of the scaled scores: checked against a direct double computation.
TEST(HydragenTest, PartialAttentionReturnsLogSumExp) {
  for (const std::string backend : kBackends) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto ops = Backend(backend);
    PagePool pool(4, 1, 8, 2);
    const std::vector<float*> table = pool.NewPages(3);
    Rng rng(3);
    const std::vector<float> q = rng.Uniform(8);
    std::vector<float> out(8), lse(1);
    Workspace ws;
    PartialAttentionArgs a;
    a.rows = 1;
    a.heads = 1;
    a.q = q.data();
    a.ld_q = 8;
    a.kv = pool.View(table);
    a.key_begin = 3;
    a.key_end = 10;
    a.scale = 0.7f;
    a.out = out.data();
    a.ld_out = 8;
    a.lse = lse.data();
    a.ld_lse = 1;
    ops->PartialAttention(a, ws);
    double sum = 0.0;
    for (int64_t p = 3; p < 10; ++p) {
      const float* k = a.kv.k_block(p / 4, 0) + (p % 4) * 8;
      double dot = 0.0;
      for (int i = 0; i < 8; ++i) dot += double{q[i]} * k[i];
      sum += std::exp(0.7 * dot);
    }
    EXPECT_NEAR(lse[0], std::log(sum), 1e-5);
  }
}

// Causal rows of PartialAttention over [0, end) equal Attention's rows (suffix prefill).
TEST(HydragenTest, CausalPartialAttentionEqualsAttention) {
  for (const std::string backend : kBackends) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto ops = Backend(backend);
    PagePool pool(16, 2, 16, 6);
    const std::vector<float*> table = pool.NewPages(3);
    Rng rng(7);
    const int64_t rows = 9, start = 30, width = 4 * 16;
    const std::vector<float> q = rng.Uniform(rows * width);
    std::vector<float> want(rows * width), got(rows * width), lse(rows * 4);
    Workspace ws;
    AttentionArgs a;
    a.tokens = rows;
    a.start_pos = start;
    a.heads = 4;
    a.q = q.data();
    a.ld_q = width;
    a.kv = pool.View(table);
    a.scale = 0.25f;
    a.out = want.data();
    a.ld_out = width;
    ops->Attention(a, ws);
    PartialAttentionArgs p;
    p.rows = rows;
    p.start_pos = start;
    p.causal = true;
    p.heads = 4;
    p.q = q.data();
    p.ld_q = width;
    p.kv = a.kv;
    p.key_begin = 0;
    p.key_end = 48;
    p.scale = 0.25f;
    p.out = got.data();
    p.ld_out = width;
    p.lse = lse.data();
    p.ld_lse = 4;
    ops->PartialAttention(p, ws);
    EXPECT_TRUE(AllClose(got, want, 1e-6f, 1e-6f));
  }
}

// Scores of ~±1e3: exp of a raw score overflows fp32 (e^88), so this only passes if every part
// and the merge work relative to a maximum.
TEST(HydragenTest, HugeLogitsStayExact) {
  for (const std::string backend : kBackends) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto ops = Backend(backend);
    ReferenceOps ref;
    const Shape shape{4, 2, 16};
    PagePool pool(16, shape.kv_heads, shape.head_dim, 21, 8.0f);
    Rng rng(22);
    const DecodeBatch b = SharedPrefixBatch(pool, shape, 2, {1, 5, 17, 20}, rng, 8.0f);
    // q·k reaches ~±500 per head, times scale 2: scores ~1e3.
    const std::vector<float> got =
        HydragenAttention(*ops, pool, b, shape, 2.0f, {{0, 4, 0, 32}}, {32, 32, 32, 32});
    const std::vector<float> want = PlainAttention(ref, pool, b, shape, 2.0f);
    for (float o : got) ASSERT_TRUE(std::isfinite(o));
    // Scores ~1e3 carry fp32 rounding of ~6e-5 each (and the fp32 LSE as much), which moves
    // softmax weights by that relative amount; outputs are averages of values up to 8.
    EXPECT_TRUE(AllClose(got, want, 2e-3f, 1e-3f));
  }
}

// Two levels: a root shared by all six sequences, then two subtrees of three sharing more pages.
// Each level is attended once by the rows below it; the three parts merge per sequence.
TEST(HydragenTest, HierarchicalSharingEqualsPlainAttention) {
  for (const std::string backend : kBackends) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto ops = Backend(backend);
    ReferenceOps ref;
    const Shape shape{8, 2, 16};
    const int32_t pt = 8;
    PagePool pool(pt, shape.kv_heads, shape.head_dim, 31);
    Rng rng(32);
    const std::vector<float*> root = pool.NewPages(3);
    DecodeBatch b;
    for (int g = 0; g < 2; ++g) {
      std::vector<float*> mid = root;
      for (float* p : pool.NewPages(2 + g)) mid.push_back(p);
      for (int i = 0; i < 3; ++i) {
        std::vector<float*> table = mid;
        const int64_t suffix = 1 + 5 * i;
        const int64_t pos = static_cast<int64_t>(mid.size()) * pt + suffix - 1;
        while (static_cast<int64_t>(table.size()) * pt <= pos) table.push_back(pool.NewPage());
        b.tables.push_back(table);
        b.pos.push_back(pos);
      }
    }
    b.q = rng.Uniform(6 * shape.heads * shape.head_dim);
    const std::vector<SharedLevel> levels = {
        {0, 6, 0, 3 * pt}, {0, 3, 3 * pt, 5 * pt}, {3, 3, 3 * pt, 6 * pt}};
    const std::vector<int64_t> suffix_begin = {5 * pt, 5 * pt, 5 * pt, 6 * pt, 6 * pt, 6 * pt};
    const std::vector<float> got =
        HydragenAttention(*ops, pool, b, shape, 0.25f, levels, suffix_begin);
    EXPECT_TRUE(AllClose(got, PlainAttention(ref, pool, b, shape, 0.25f), 2e-5f, 2e-5f));
  }
}

// Merging is order-independent, chains through its lse output, and may write over part 0.
TEST(HydragenTest, MergeChainsAndWorksInPlace) {
  for (const std::string backend : kBackends) {
    if (!Available(backend)) continue;
    SCOPED_TRACE(backend);
    auto ops = Backend(backend);
    Rng rng(41);
    const int64_t rows = 3, heads = 2, dh = 4, width = heads * dh;
    std::vector<std::vector<float>> outs, lses;
    for (int i = 0; i < 3; ++i) {
      outs.push_back(rng.Uniform(rows * width));
      lses.push_back(rng.Uniform(rows * heads, -50, 50));
    }
    lses[1][2] = kNegInf;                                       // an empty part for one (row, head)
    outs[1][2 * dh] = std::numeric_limits<float>::quiet_NaN();  // …whose out must not be read
    auto part = [&](int i) { return AttentionPart{outs[i].data(), width, lses[i].data(), heads}; };
    std::vector<float> all(rows * width), all_lse(rows * heads);
    const AttentionPart three[] = {part(0), part(1), part(2)};
    ops->MergeAttention(three, rows, heads, dh, all.data(), width, all_lse.data(), heads);
    for (float o : all) ASSERT_TRUE(std::isfinite(o));
    const AttentionPart reversed[] = {part(2), part(1), part(0)};
    std::vector<float> rev(rows * width);
    ops->MergeAttention(reversed, rows, heads, dh, rev.data(), width, nullptr, 0);
    EXPECT_TRUE(AllClose(rev, all, 1e-6f, 1e-6f));
    // ((0 + 1) + 2), the first merge written over part 0.
    std::vector<float> first_lse(rows * heads);
    const AttentionPart two[] = {part(0), part(1)};
    ops->MergeAttention(two, rows, heads, dh, outs[0].data(), width, first_lse.data(), heads);
    const AttentionPart chained[] = {{outs[0].data(), width, first_lse.data(), heads}, part(2)};
    std::vector<float> chain(rows * width), chain_lse(rows * heads);
    ops->MergeAttention(chained, rows, heads, dh, chain.data(), width, chain_lse.data(), heads);
    EXPECT_TRUE(AllClose(chain, all, 1e-6f, 1e-6f));
    EXPECT_TRUE(AllClose(chain_lse, all_lse, 1e-5f, 1e-6f));
  }
}

}  // namespace
}  // namespace tandem::kernels
