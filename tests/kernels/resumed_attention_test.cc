// Exact Hydragen at the op level (kernels/cpu/attention_stream.h): decode rows advanced together
// over the levels of pages they share (AdvanceSharedAttention) and then each over its own keys
// (FinishAttention) give, bit for bit, what Attention gives each row alone, on CpuOps in
// batch-invariant mode. Shapes cover GQA groups of 1 to 72 (more than the 64 rows of one register
// tile), head dims that are not a multiple of 16, pages of 4 to 32 tokens, rows that fill several
// tasks and partial vector lanes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

// The batch of the test: every row shares `root_pages`; the first `inner_rows` also share the next
// `inner_pages`; each row then has a private suffix of 1 … 2 pages and a bit.
struct TwoLevelBatch {
  DecodeBatch batch;
  int64_t inner_rows = 0;
  int64_t root_end = 0, inner_end = 0;  // keys
};

TwoLevelBatch MakeBatch(PagePool& pool, const Shape& s, int64_t rows, int64_t root_pages,
                        int64_t inner_pages, float q_range, Rng& rng) {
  TwoLevelBatch t;
  const int64_t pt = pool.page_tokens();
  const std::vector<float*> root = pool.NewPages(root_pages);
  const std::vector<float*> inner = pool.NewPages(inner_pages);
  t.inner_rows = rows >= 2 ? rows / 2 + 1 : 0;
  t.root_end = root_pages * pt;
  t.inner_end = (root_pages + inner_pages) * pt;
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<float*> table = root;
    const bool in_inner = i < t.inner_rows;
    if (in_inner) table.insert(table.end(), inner.begin(), inner.end());
    const int64_t own_from = static_cast<int64_t>(table.size()) * pt;
    const int64_t pos = own_from + (i * 7) % (2 * pt + 3);
    while (static_cast<int64_t>(table.size()) * pt <= pos) table.push_back(pool.NewPage());
    t.batch.tables.push_back(table);
    t.batch.pos.push_back(pos);
  }
  t.batch.q = rng.Uniform(rows * s.heads * s.head_dim, -q_range, q_range);
  return t;
}

// The batch through AdvanceSharedAttention (root level with start, then the inner level) and
// FinishAttention.
std::vector<float> ResumedAttention(Ops& ops, const PagePool& pool, const TwoLevelBatch& t,
                                    const Shape& s, float scale) {
  const DecodeBatch& b = t.batch;
  const int64_t rows = static_cast<int64_t>(b.pos.size());
  const int64_t width = int64_t{s.heads} * s.head_dim;
  std::vector<float> acc(rows * width, 7.0f), max(rows * s.heads, 7.0f), sum(rows * s.heads, 7.0f);
  AttentionState state{acc.data(), width, max.data(), sum.data(), s.heads};
  Workspace ws;
  auto level = [&](int64_t count, int64_t begin, int64_t end, bool start) {
    SharedPrefixAttentionArgs a;
    a.rows = count;
    a.heads = s.heads;
    a.q = b.q.data();
    a.ld_q = width;
    a.kv = pool.View(b.tables[0]);
    a.key_begin = begin;
    a.key_end = end;
    a.scale = scale;
    ws.Reset();
    ops.AdvanceSharedAttention(a, state, start, ws);
  };
  level(rows, 0, t.root_end, /*start=*/true);
  if (t.inner_rows > 0) level(t.inner_rows, t.root_end, t.inner_end, /*start=*/false);

  std::vector<float* const*> tables;
  std::vector<int64_t> begins, ends;
  for (int64_t i = 0; i < rows; ++i) {
    tables.push_back(b.tables[i].data());
    begins.push_back(i < t.inner_rows ? t.inner_end : t.root_end);
    ends.push_back(b.pos[i] + 1);
  }
  std::vector<float> out(rows * width, 7.0f);
  PartialAttentionArgs a;
  a.rows = rows;
  a.heads = s.heads;
  a.q = b.q.data();
  a.ld_q = width;
  a.kv = pool.View(b.tables[0]);
  a.page_tables = tables.data();
  a.key_begins = begins.data();
  a.key_ends = ends.data();
  a.scale = scale;
  a.out = out.data();
  a.ld_out = width;
  ws.Reset();
  ops.FinishAttention(a, state, ws);
  return out;
}

bool SameBits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

std::string FirstDifference(const std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) {
      return "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " vs " +
             std::to_string(y[i]);
    }
  }
  return "none";
}

class ResumedAttentionTest : public ::testing::TestWithParam<std::tuple<Shape, int32_t, int64_t>> {
};

TEST_P(ResumedAttentionTest, SharedLevelsThenOwnKeysGiveAttentionsBits) {
  const auto [shape, page_tokens, rows] = GetParam();
  CpuOps cpu(3);
  cpu.set_batch_invariant(true);
  ASSERT_TRUE(cpu.ResumesAttentionExactly());
  ReferenceOps ref;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  // Queries of range 1 give softmaxes close to flat; of range 6, peaked ones whose maximum moves
  // from tile to tile (the correction factors far from 1).
  for (const float q_range : {1.0f, 6.0f}) {
    SCOPED_TRACE("q range " + std::to_string(q_range));
    PagePool pool(page_tokens, shape.kv_heads, shape.head_dim, 21 + page_tokens + rows);
    Rng rng(8 + rows);
    const TwoLevelBatch t = MakeBatch(pool, shape, rows, 3, 2, q_range, rng);
    const std::vector<float> got = ResumedAttention(cpu, pool, t, shape, scale);
    const std::vector<float> alone = PlainAttention(cpu, pool, t.batch, shape, scale);
    EXPECT_TRUE(SameBits(got, alone)) << FirstDifference(got, alone);
    EXPECT_TRUE(AllClose(got, PlainAttention(ref, pool, t.batch, shape, scale), 2e-5f, 2e-5f));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ResumedAttentionTest,
    ::testing::Combine(::testing::Values(Shape{4, 4, 16}, Shape{8, 2, 32}, Shape{6, 1, 8},
                                         Shape{8, 2, 20}, Shape{4, 2, 33}, Shape{32, 8, 128},
                                         Shape{72, 1, 16}),
                       ::testing::Values(16, 5, 32, 4), ::testing::Values(1, 2, 7, 40)),
    [](const auto& info) {
      const Shape& s = std::get<0>(info.param);
      return "h" + std::to_string(s.heads) + "kv" + std::to_string(s.kv_heads) + "d" +
             std::to_string(s.head_dim) + "_page" + std::to_string(std::get<1>(info.param)) +
             "_rows" + std::to_string(std::get<2>(info.param));
    });

// Only the batch-invariant mode promises the bits; outside it Hydragen takes the faster merge.
TEST(ResumedAttentionTest, OnlyTheBatchInvariantModeResumes) {
  CpuOps cpu(1);
  cpu.set_batch_invariant(false);
  EXPECT_FALSE(cpu.ResumesAttentionExactly());
  cpu.set_batch_invariant(true);
  EXPECT_TRUE(cpu.ResumesAttentionExactly());
  ReferenceOps ref;
  EXPECT_FALSE(ref.ResumesAttentionExactly());
}

// One thread or three, the rows split into tasks differently: the same bits.
TEST(ResumedAttentionTest, ThreadsDoNotChangeTheBits) {
  const Shape shape{8, 2, 32};
  PagePool pool(16, shape.kv_heads, shape.head_dim, 77);
  Rng rng(78);
  const TwoLevelBatch t = MakeBatch(pool, shape, 70, 4, 3, 3.0f, rng);
  const float scale = 1.0f / std::sqrt(32.0f);
  CpuOps one(1), three(3);
  one.set_batch_invariant(true);
  three.set_batch_invariant(true);
  EXPECT_TRUE(SameBits(ResumedAttention(one, pool, t, shape, scale),
                       ResumedAttention(three, pool, t, shape, scale)));
}

}  // namespace
}  // namespace tandem::kernels
