// Decode batches: one call over many sequences, each row a sequence's one new token, its state
// (the recurrent ops' state_table) or its pages and position (attention's page_tables) found
// through tables, must give bit for bit what one call per sequence gives, on every host
// backend, with the states scattered in any order and at an offset inside their blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <numeric>
#include <vector>

#include "tests/kernels/batch_test_util.h"

namespace tandem::kernels {
namespace {

using testing::HostBackends;
using testing::Rng;
using testing::ScatteredStates;

TEST(DecodeBatchTest, CausalConvStepOfManySequencesEqualsOneCallEach) {
  for (int64_t rows : {2, 7}) {
    for (int32_t channels : {5, 130}) {
      const int32_t kernel = 4;
      Rng rng(rows * 100 + channels);
      const int64_t ld = channels + 2;
      const std::vector<float> u = rng.Uniform(rows * ld),
                               w = rng.Uniform(int64_t{channels} * kernel),
                               bias = rng.Uniform(channels);
      for (auto& ops : HostBackends()) {
        ScatteredStates batched(rows, int64_t{kernel - 1} * channels, 3),
            single(rows, int64_t{kernel - 1} * channels, 3);
        std::vector<float> out_batched(rows * ld, 0.0f), out_single(rows * ld, 0.0f);
        CausalConvArgs a;
        a.channels = channels;
        a.kernel = kernel;
        a.u = u.data();
        a.ld_u = ld;
        a.weight = w.data();
        a.bias = bias.data();
        a.ld_out = ld;
        CausalConvArgs batch = a;
        batch.tokens = rows;
        batch.out = out_batched.data();
        batch.state_table = batched.table.data();
        batch.state_offset = ScatteredStates::kOffset;
        ops->CausalConv1dStep(batch);
        for (int64_t r = 0; r < rows; ++r) {
          CausalConvArgs one = a;
          one.tokens = 1;
          one.u = u.data() + r * ld;
          one.out = out_single.data() + r * ld;
          one.state = single.state(r);
          ops->CausalConv1dStep(one);
        }
        EXPECT_EQ(out_batched, out_single) << ops->name() << " rows " << rows;
        EXPECT_EQ(batched.memory, single.memory) << ops->name() << " rows " << rows;
      }
    }
  }
}

TEST(DecodeBatchTest, SelectiveStateUpdateOfManySequencesEqualsOneCallEach) {
  for (int64_t rows : {2, 9}) {
    for (int32_t inner : {3, 150}) {
      const int32_t n = 16;
      Rng rng(rows * 1000 + inner);
      const int64_t ld = inner + 3, ld_bc = n + 1;
      const auto u = rng.Uniform(rows * ld), delta = rng.Uniform(rows * ld, -4, 2),
                 delta_bias = rng.Uniform(inner, -1, 1),
                 a_log = rng.Uniform(int64_t{inner} * n, -3, -0.05f), b = rng.Uniform(rows * ld_bc),
                 c = rng.Uniform(rows * ld_bc), d = rng.Uniform(inner), z = rng.Uniform(rows * ld);
      for (auto& ops : HostBackends()) {
        ScatteredStates batched(rows, int64_t{inner} * n, 4), single(rows, int64_t{inner} * n, 4);
        std::vector<float> y_batched(rows * ld, 0.0f), y_single(rows * ld, 0.0f);
        SelectiveScanArgs s;
        s.inner = inner;
        s.state_size = n;
        s.ld_u = s.ld_delta = s.ld_z = s.ld_y = ld;
        s.ld_b = s.ld_c = ld_bc;
        s.delta_bias = delta_bias.data();
        s.a = a_log.data();
        s.d = d.data();
        auto rows_from = [&](SelectiveScanArgs x, int64_t r) {
          x.u = u.data() + r * ld;
          x.delta = delta.data() + r * ld;
          x.b = b.data() + r * ld_bc;
          x.c = c.data() + r * ld_bc;
          x.z = z.data() + r * ld;
          return x;
        };
        SelectiveScanArgs batch = rows_from(s, 0);
        batch.tokens = rows;
        batch.y = y_batched.data();
        batch.state_table = batched.table.data();
        batch.state_offset = ScatteredStates::kOffset;
        ops->SelectiveStateUpdate(batch);
        for (int64_t r = 0; r < rows; ++r) {
          SelectiveScanArgs one = rows_from(s, r);
          one.tokens = 1;
          one.y = y_single.data() + r * ld;
          one.state = single.state(r);
          ops->SelectiveStateUpdate(one);
        }
        EXPECT_EQ(y_batched, y_single) << ops->name() << " rows " << rows;
        EXPECT_EQ(batched.memory, single.memory) << ops->name() << " rows " << rows;
      }
    }
  }
}

TEST(DecodeBatchTest, SsdStateUpdateOfManySequencesEqualsOneCallEach) {
  for (int64_t rows : {2, 6}) {
    for (int32_t groups : {1, 2}) {
      const int32_t heads = 8, p = 16, n = 32;
      Rng rng(rows * 10 + groups);
      const int64_t ld_x = int64_t{heads} * p + 1, ld_dt = heads + 2,
                    ld_bc = int64_t{groups} * n + 3;
      const auto x = rng.Uniform(rows * ld_x), dt = rng.Uniform(rows * ld_dt, -5, 1),
                 dt_bias = rng.Uniform(heads, -1, 1), a_log = rng.Uniform(heads, -4, -0.1f),
                 b = rng.Uniform(rows * ld_bc), c = rng.Uniform(rows * ld_bc),
                 d = rng.Uniform(heads);
      for (auto& ops : HostBackends()) {
        ScatteredStates batched(rows, int64_t{heads} * p * n, 5),
            single(rows, int64_t{heads} * p * n, 5);
        std::vector<float> y_batched(rows * ld_x, 0.0f), y_single(rows * ld_x, 0.0f);
        SsdScanArgs s;
        s.heads = heads;
        s.head_dim = p;
        s.groups = groups;
        s.state_size = n;
        s.ld_x = s.ld_y = ld_x;
        s.ld_dt = ld_dt;
        s.ld_b = s.ld_c = ld_bc;
        s.dt_bias = dt_bias.data();
        s.a = a_log.data();
        s.d = d.data();
        auto rows_from = [&](SsdScanArgs v, int64_t r) {
          v.x = x.data() + r * ld_x;
          v.dt = dt.data() + r * ld_dt;
          v.b = b.data() + r * ld_bc;
          v.c = c.data() + r * ld_bc;
          return v;
        };
        SsdScanArgs batch = rows_from(s, 0);
        batch.tokens = rows;
        batch.y = y_batched.data();
        batch.state_table = batched.table.data();
        batch.state_offset = ScatteredStates::kOffset;
        ops->SsdStateUpdate(batch);
        for (int64_t r = 0; r < rows; ++r) {
          SsdScanArgs one = rows_from(s, r);
          one.tokens = 1;
          one.y = y_single.data() + r * ld_x;
          one.state = single.state(r);
          ops->SsdStateUpdate(one);
        }
        EXPECT_EQ(y_batched, y_single) << ops->name() << " rows " << rows;
        EXPECT_EQ(batched.memory, single.memory) << ops->name() << " rows " << rows;
      }
    }
  }
}

// Attention: rows of different sequences, each with its own pages (filled with random K/V, the
// layer at an offset) and its own position, in one call.
TEST(DecodeBatchTest, AttentionOfManySequencesEqualsOneCallEach) {
  const int32_t heads = 8, kv_heads = 2, head_dim = 16, page_tokens = 4;
  const int64_t positions[] = {0, 9, 3, 17, 4};
  const int64_t rows = std::size(positions);
  const int64_t layer_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
  Rng rng(11);
  // Sequence r owns pages for positions [0, positions[r]]; page memory holds two layers.
  std::vector<std::vector<float>> storage;
  std::vector<std::vector<float*>> pages(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p <= positions[r] / page_tokens; ++p) {
      storage.push_back(rng.Uniform(2 * layer_floats));
      pages[r].push_back(storage.back().data());
    }
  }
  std::vector<float* const*> tables;
  for (auto& p : pages) tables.push_back(p.data());
  const int64_t ld = int64_t{heads} * head_dim + 3;
  const std::vector<float> q = rng.Uniform(rows * ld);
  for (auto& ops : HostBackends()) {
    AttentionArgs a;
    a.heads = heads;
    a.ld_q = a.ld_out = ld;
    a.kv.page_tokens = page_tokens;
    a.kv.num_kv_heads = kv_heads;
    a.kv.head_dim = head_dim;
    a.kv.layer_offset = layer_floats;
    a.scale = 0.25f;
    std::vector<float> batched(rows * ld, 0.0f), single(rows * ld, 0.0f);
    AttentionArgs batch = a;
    batch.tokens = rows;
    batch.q = q.data();
    batch.out = batched.data();
    batch.page_tables = tables.data();
    batch.positions = positions;
    Workspace ws;
    ops->Attention(batch, ws);
    for (int64_t r = 0; r < rows; ++r) {
      AttentionArgs one = a;
      one.tokens = 1;
      one.start_pos = positions[r];
      one.kv.pages = pages[r].data();
      one.q = q.data() + r * ld;
      one.out = single.data() + r * ld;
      ops->Attention(one, ws);
    }
    EXPECT_EQ(batched, single) << ops->name();
  }
}

// Hydragen's suffixes: rows of different sequences, each over its own key range of its own
// pages, with the log-sum-exp.
TEST(DecodeBatchTest, PartialAttentionOfManySequencesEqualsOneCallEach) {
  const int32_t heads = 4, kv_heads = 2, head_dim = 8, page_tokens = 4;
  const int64_t begins[] = {0, 8, 5, 12}, ends[] = {3, 13, 5, 16};  // one empty range
  const int64_t rows = std::size(begins);
  const int64_t page_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
  Rng rng(12);
  std::vector<std::vector<float>> storage;
  std::vector<std::vector<float*>> pages(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p * page_tokens < ends[r]; ++p) {
      storage.push_back(rng.Uniform(page_floats));
      pages[r].push_back(storage.back().data());
    }
  }
  std::vector<float* const*> tables;
  for (auto& p : pages) tables.push_back(p.data());
  const int64_t ld = int64_t{heads} * head_dim;
  const std::vector<float> q = rng.Uniform(rows * ld);
  for (auto& ops : HostBackends()) {
    PartialAttentionArgs a;
    a.heads = heads;
    a.ld_q = a.ld_out = ld;
    a.ld_lse = heads;
    a.kv.page_tokens = page_tokens;
    a.kv.num_kv_heads = kv_heads;
    a.kv.head_dim = head_dim;
    a.scale = 0.3f;
    std::vector<float> out_batched(rows * ld), out_single(rows * ld);
    std::vector<float> lse_batched(rows * heads), lse_single(rows * heads);
    PartialAttentionArgs batch = a;
    batch.rows = rows;
    batch.q = q.data();
    batch.out = out_batched.data();
    batch.lse = lse_batched.data();
    batch.page_tables = tables.data();
    batch.key_begins = begins;
    batch.key_ends = ends;
    Workspace ws;
    ops->PartialAttention(batch, ws);
    for (int64_t r = 0; r < rows; ++r) {
      PartialAttentionArgs one = a;
      one.rows = 1;
      one.kv.pages = pages[r].data();
      one.key_begin = begins[r];
      one.key_end = ends[r];
      one.q = q.data() + r * ld;
      one.out = out_single.data() + r * ld;
      one.lse = lse_single.data() + r * heads;
      ops->PartialAttention(one, ws);
    }
    EXPECT_EQ(out_batched, out_single) << ops->name();
    EXPECT_EQ(lse_batched, lse_single) << ops->name();
  }
}

// RoPE at each row's own position and K/V written into each row's own pages.
TEST(DecodeBatchTest, RopeAndKvWritesOfManySequencesEqualOneCallEach) {
  const int32_t heads = 2, head_dim = 8, page_tokens = 4;
  const int64_t positions[] = {5, 0, 11};
  const int64_t rows = std::size(positions), width = int64_t{heads} * head_dim;
  const int64_t page_floats = 2 * width * page_tokens;
  Rng rng(13);
  const std::vector<float> x = rng.Uniform(rows * width), k = rng.Uniform(rows * width),
                           v = rng.Uniform(rows * width);
  for (auto& ops : HostBackends()) {
    std::vector<float> rotated_batch = x, rotated_single = x;
    ops->RopeAt(rotated_batch.data(), width, rows, heads, head_dim, positions, 10000.0f);
    for (int64_t r = 0; r < rows; ++r) {
      ops->Rope(rotated_single.data() + r * width, width, 1, heads, head_dim, positions[r],
                10000.0f);
    }
    EXPECT_EQ(rotated_batch, rotated_single) << ops->name();

    // Each row's sequence has three pages; both runs start from the same contents.
    std::vector<float> batch_pages = rng.Uniform(rows * 3 * page_floats),
                       single_pages = batch_pages;
    std::vector<std::vector<float*>> batch_tables(rows), single_tables(rows);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t p = 0; p < 3; ++p) {
        batch_tables[r].push_back(batch_pages.data() + (r * 3 + p) * page_floats);
        single_tables[r].push_back(single_pages.data() + (r * 3 + p) * page_floats);
      }
    }
    std::vector<float* const*> tables;
    for (auto& t : batch_tables) tables.push_back(t.data());
    PagedKv kv;
    kv.page_tokens = page_tokens;
    kv.num_kv_heads = heads;
    kv.head_dim = head_dim;
    ops->WriteKvAt(k.data(), width, v.data(), width, rows, tables.data(), positions, kv);
    for (int64_t r = 0; r < rows; ++r) {
      PagedKv own = kv;
      own.pages = single_tables[r].data();
      ops->WriteKv(k.data() + r * width, width, v.data() + r * width, width, 1, positions[r], own);
    }
    EXPECT_EQ(batch_pages, single_pages) << ops->name();
  }
}

TEST(DecodeBatchTest, RowsGatherAndScatterByIndex) {
  const std::vector<float> src = {0, 1, 2, 10, 11, 12, 20, 21, 22};  // 3 rows of 3
  const int32_t rows[] = {2, 0};
  for (auto& ops : HostBackends()) {
    std::vector<float> gathered(4, -1.0f);  // 2 rows of 2 columns
    ops->GatherRowsAt(src.data(), 3, rows, 2, gathered.data(), 2);
    EXPECT_EQ(gathered, (std::vector<float>{20, 21, 0, 1})) << ops->name();
    std::vector<float> scattered(9, -1.0f);
    ops->ScatterRowsTo(gathered.data(), 2, rows, 2, scattered.data(), 3);
    EXPECT_EQ(scattered, (std::vector<float>{0, 1, -1, -1, -1, -1, 20, 21, -1})) << ops->name();
  }
}

}  // namespace
}  // namespace tandem::kernels
