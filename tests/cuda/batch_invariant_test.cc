// CudaOps in batch-invariant mode (CudaOpsOptions::batch_invariant): a row's result is the same
// bits whatever else shares its call and however it comes, a prefill chunk, a varlen pass, a
// decode batch or alone. Checked for Linear (every weight format, at several row counts) and
// attention (a head dim the tensor-core tiles take, and ones they do not), and against the
// reference within rounding. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/workspace.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/test_util.h"

namespace tandem::kernels::cuda {
namespace {

using kernels::testing::AllClose;
using kernels::testing::Rng;
using testing::ToDevice;
using testing::ToHost;

std::unique_ptr<CudaOps> InvariantOps() {
  CudaOpsOptions options;
  options.batch_invariant = true;
  std::string error;
  auto ops = CudaOps::Create(0, options, &error);
  EXPECT_NE(ops, nullptr) << error;
  return ops;
}

TEST(CudaBatchInvariantTest, LinearRowsGetTheSameBitsAtEveryRowCount) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = InvariantOps();
  ASSERT_NE(ops, nullptr);
  const int64_t k = 256, n = 72, rows = 40;
  const std::vector<float> x = Rng(5).Uniform(rows * k), bias = Rng(6).Uniform(n);
  const auto dx = ToDevice(x), dbias = ToDevice(bias);
  for (WeightFormat format :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16, WeightFormat::kI8}) {
    SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(format));
    const auto w = testing::MakeDeviceWeights(format, n, k, 7);
    // All rows in one call (past where the fast mode takes cuBLAS or the tiled GEMM), then in
    // calls of 7 rows and of one.
    auto whole = ToDevice(std::vector<float>(rows * n, 0.0f));
    ops->Linear(dx.get(), k, rows, w->device, dbias.get(), whole.get(), n);
    ASSERT_EQ(ops->Synchronize(), "");
    for (int64_t step : {int64_t{7}, int64_t{1}}) {
      auto parts = ToDevice(std::vector<float>(rows * n, 0.0f));
      for (int64_t r = 0; r < rows; r += step) {
        ops->Linear(dx.get() + r * k, k, std::min(step, rows - r), w->device, dbias.get(),
                    parts.get() + r * n, n);
      }
      ASSERT_EQ(ops->Synchronize(), "");
      EXPECT_TRUE(AllClose(ToHost(parts), ToHost(whole), 0.0f, 0.0f)) << "calls of " << step;
    }
    std::vector<float> want(rows * n, 0.0f);
    ReferenceOps().Linear(x.data(), k, rows, w->host, bias.data(), want.data(), n);
    EXPECT_TRUE(AllClose(ToHost(whole), want, 1e-3f, 1e-3f));
  }
}

TEST(CudaBatchInvariantTest, AttentionRowsGetTheSameBitsInAPrefillADecodeBatchAndAlone) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = InvariantOps();
  ASSERT_NE(ops, nullptr);
  const int32_t heads = 8, kv_heads = 2, page_tokens = 16;
  // One sequence: 37 rows from position 10 (3 pages), as a prefill chunk would bring them.
  const int64_t first = 10, rows = 37;
  // 64 and 128: the tensor-core tiles; 16 and 160: the row kernel.
  for (int32_t head_dim : {64, 128, 16, 160}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    const int64_t page_floats = 2 * int64_t{kv_heads} * page_tokens * head_dim;
    testing::PagedSequences kv({(first + rows + page_tokens - 1) / page_tokens}, page_floats, 41);
    const int64_t width = int64_t{heads} * head_dim;
    const std::vector<float> q = Rng(head_dim + 1).Uniform(rows * width);
    std::vector<float* const*> host_rows(rows, kv.host_tables[0]);
    std::vector<float* const*> device_rows(rows, kv.device_page_tables[0].get());
    std::vector<int64_t> positions(rows);
    for (int64_t t = 0; t < rows; ++t) positions[t] = first + t;

    AttentionArgs a;
    a.tokens = rows;
    a.heads = heads;
    a.ld_q = a.ld_out = width;
    a.kv.page_tokens = page_tokens;
    a.kv.num_kv_heads = kv_heads;
    a.kv.head_dim = head_dim;
    a.scale = 0.125f;
    std::vector<float> want(rows * width, 0.0f);
    a.q = q.data();
    a.out = want.data();
    a.page_tables = host_rows.data();
    a.positions = positions.data();
    Workspace ws;
    ReferenceOps().Attention(a, ws);

    const auto dq = ToDevice(q);
    const auto drows = ToDevice(device_rows);
    const auto dpositions = ToDevice(positions);
    const auto dcu = ToDevice(std::vector<int64_t>{0, rows});
    Workspace device_ws(1 << 16, &ops->activation_memory());
    a.q = dq.get();
    a.page_tables = drows.get();
    a.positions = dpositions.get();
    auto run = [&](const AttentionArgs& args, DeviceBuffer<float>& out) {
      ops->Attention(args, device_ws);
      EXPECT_EQ(ops->Synchronize(), "");
      return ToHost(out);
    };

    // A varlen pass of the one sequence (a prefill chunk).
    auto prefill_out = ToDevice(std::vector<float>(rows * width, 9.0f));
    AttentionArgs prefill = a;
    prefill.out = prefill_out.get();
    prefill.sequences = 1;
    prefill.cu_seqlens = dcu.get();
    prefill.max_seqlen = rows;
    const std::vector<float> from_prefill = run(prefill, prefill_out);
    EXPECT_TRUE(AllClose(from_prefill, want, 1e-5f, 1e-4f));

    // The sequence's pages without tables: one sequence's call.
    auto single_out = ToDevice(std::vector<float>(rows * width, 9.0f));
    AttentionArgs single = a;
    single.out = single_out.get();
    single.page_tables = nullptr;
    single.positions = nullptr;
    single.kv.pages = kv.device_page_tables[0].get();
    single.start_pos = first;
    EXPECT_TRUE(AllClose(run(single, single_out), from_prefill, 0.0f, 0.0f)) << "one sequence";

    // The same rows as a decode batch, each its own row.
    auto batch_out = ToDevice(std::vector<float>(rows * width, 9.0f));
    AttentionArgs batch = a;
    batch.out = batch_out.get();
    EXPECT_TRUE(AllClose(run(batch, batch_out), from_prefill, 0.0f, 0.0f)) << "decode batch";

    // Each row alone.
    auto alone_out = ToDevice(std::vector<float>(rows * width, 9.0f));
    for (int64_t t = 0; t < rows; ++t) {
      AttentionArgs one = a;
      one.tokens = 1;
      one.q = dq.get() + t * width;
      one.out = alone_out.get() + t * width;
      one.page_tables = drows.get() + t;
      one.positions = dpositions.get() + t;
      ops->Attention(one, device_ws);
    }
    ASSERT_EQ(ops->Synchronize(), "");
    EXPECT_TRUE(AllClose(ToHost(alone_out), from_prefill, 0.0f, 0.0f)) << "alone";
  }
}

}  // namespace
}  // namespace tandem::kernels::cuda
