// CudaOps with CUDA graphs (CudaOpsOptions::graphs): a pass is recorded, run eagerly the first
// time its signature is seen, captured the second, replayed after; a replay must compute what
// launching would, with this pass's uploads (ids, tables), not the captured pass's. Skips
// without a CUDA device.
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
using testing::MakeDeviceWeights;
using testing::ToDevice;
using testing::ToHost;

std::unique_ptr<CudaOps> NewGraphOps() {
  std::string error;
  CudaOpsOptions options;
  options.graphs = true;
  auto ops = CudaOps::Create(0, options, &error);
  EXPECT_NE(ops, nullptr) << error;
  return ops;
}

constexpr int32_t kHeads = 2, kHeadDim = 16;
constexpr int64_t kWidth = kHeads * kHeadDim;

// One small pass: embedding rows by id, rotated at positions given as an uploaded table, plus
// a residual; read back. What a decode step does, in miniature.
struct MiniPass {
  explicit MiniPass(CudaOps& ops) : ops(ops), ws(1 << 20, &ops.activation_memory()) {
    table = MakeDeviceWeights(WeightFormat::kF32, 40, kWidth, 9);
    residual_host = Rng(10).Uniform(8 * kWidth);
    residual = ToDevice(residual_host);
  }

  std::vector<float> Run(const std::vector<int32_t>& ids, const std::vector<int64_t>& positions,
                         std::string* error) {
    const int64_t rows = static_cast<int64_t>(ids.size());
    ws.Reset();
    auto* device_positions = ws.Array<int64_t>(positions.size());
    ops.UploadTables(device_positions, positions.data(), positions.size() * sizeof(int64_t));
    float* x = ws.Floats(rows * kWidth);
    ops.GatherRows(table->device, ids, x, kWidth);
    ops.RopeAt(x, kWidth, rows, kHeads, kHeadDim, device_positions, 10000.0f);
    ops.AddRows(residual.get(), kWidth, rows, kWidth, x, kWidth);
    std::vector<float> out(rows * kWidth);
    *error = ops.ReadBack(x, out.size(), out.data());
    return out;
  }

  std::vector<float> Want(const std::vector<int32_t>& ids, const std::vector<int64_t>& positions) {
    const int64_t rows = static_cast<int64_t>(ids.size());
    ReferenceOps reference;
    std::vector<float> x(rows * kWidth);
    reference.GatherRows(table->host, ids, x.data(), kWidth);
    reference.RopeAt(x.data(), kWidth, rows, kHeads, kHeadDim, positions.data(), 10000.0f);
    reference.AddRows(residual_host.data(), kWidth, rows, kWidth, x.data(), kWidth);
    return x;
  }

  CudaOps& ops;
  Workspace ws;
  std::unique_ptr<testing::DeviceWeights> table;
  std::vector<float> residual_host;
  DeviceBuffer<float> residual;
};

TEST(CudaGraphsTest, ReplaysUseTheirOwnPassesUploads) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewGraphOps();
  ASSERT_NE(ops, nullptr);
  ASSERT_TRUE(ops->graphs());
  MiniPass pass(*ops);
  for (int step = 0; step < 6; ++step) {
    // Other ids and positions every step, in the same shapes: the same launches.
    const std::vector<int32_t> ids = {step, 39 - step, 2 * step, 7};
    const std::vector<int64_t> positions = {step, 100 + step, 3 * step, 1000 - step};
    std::string error;
    const std::vector<float> got = pass.Run(ids, positions, &error);
    ASSERT_EQ(error, "") << "step " << step;
    EXPECT_TRUE(AllClose(got, pass.Want(ids, positions), 1e-6f, 1e-5f)) << "step " << step;
  }
  EXPECT_EQ(ops->graph_captures(), 1);
  EXPECT_GE(ops->graph_replays(), 3);
}

TEST(CudaGraphsTest, AnotherShapeRunsEagerlyAndTheGraphStillReplays) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewGraphOps();
  ASSERT_NE(ops, nullptr);
  MiniPass pass(*ops);
  const std::vector<int32_t> four = {1, 2, 3, 4}, three = {5, 6, 7};
  const std::vector<int64_t> at4 = {9, 8, 7, 6}, at3 = {1, 2, 3};
  std::string error;
  for (int i = 0; i < 3; ++i) pass.Run(four, at4, &error);
  ASSERT_EQ(ops->graph_captures(), 1);
  const int64_t replays = ops->graph_replays();
  EXPECT_TRUE(AllClose(pass.Run(three, at3, &error), pass.Want(three, at3), 1e-6f, 1e-5f));
  EXPECT_EQ(error, "");
  EXPECT_EQ(ops->graph_replays(), replays);  // a new signature: run, not replayed
  EXPECT_TRUE(AllClose(pass.Run(four, at4, &error), pass.Want(four, at4), 1e-6f, 1e-5f));
  EXPECT_EQ(ops->graph_replays(), replays + 1);
}

TEST(CudaGraphsTest, ARefusedCallInARecordedPassIsReportedAndSkipsWhatFollows) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewGraphOps();
  ASSERT_NE(ops, nullptr);
  auto x = ToDevice(std::vector<float>(64, 1.0f));
  for (int pass = 0; pass < 3; ++pass) {          // eager, then a capture that must not hide it
    ops->Rope(x.get(), 8, 1, 1, 7, 0, 10000.0f);  // odd head_dim: refused
    ops->CopyRows(x.get() + 32, 8, 1, 8, x.get(), 8);  // skipped
    const std::string error = ops->Synchronize();
    EXPECT_NE(error.find("Rope"), std::string::npos) << pass << ": " << error;
    EXPECT_EQ(ToHost(x), std::vector<float>(64, 1.0f));
  }
  EXPECT_EQ(ops->graph_replays(), 0);
  auto y = ToDevice(std::vector<float>(8, 2.0f));
  ops->AddRows(y.get(), 8, 1, 8, x.get(), 8);
  EXPECT_EQ(ops->Synchronize(), "");
  EXPECT_EQ(ToHost(x)[0], 3.0f);
}

// A graph's uploads are copies bound to the allocation they wrote when it was captured. After
// that workspace is freed, a new one may come back at the same address, and the same pass then
// signs alike; replaying the old graph failed (or crashed in the driver) on an H200. So freeing
// activation memory drops the graphs: the next pass runs eagerly, is captured again, replays.
TEST(CudaGraphsTest, AGraphIsNeverReplayedAfterTheMemoryItUploadsIntoIsFreed) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewGraphOps();
  ASSERT_NE(ops, nullptr);
  const std::vector<int32_t> ids = {3, 1, 4, 1};
  const std::vector<int64_t> positions = {5, 9, 2, 6};
  std::string error;
  {
    // A backend's first pass allocates its staging and id buffers, which stops that pass's
    // recording: warmed up here, every round below starts alike.
    MiniPass warm_up(*ops);
    warm_up.Run(ids, positions, &error);
    ASSERT_EQ(error, "");
  }
  for (int round = 0; round < 3; ++round) {  // each round a workspace of its own, freed after
    SCOPED_TRACE(::testing::Message() << "round " << round);
    MiniPass pass(*ops);
    const int64_t replays = ops->graph_replays(), captures = ops->graph_captures();
    for (int step = 0; step < 3; ++step) {  // eager, captured, replayed
      EXPECT_TRUE(
          AllClose(pass.Run(ids, positions, &error), pass.Want(ids, positions), 1e-6f, 1e-5f))
          << "step " << step;
      ASSERT_EQ(error, "") << "step " << step;
    }
    EXPECT_EQ(ops->graph_captures(), captures + 1);
    EXPECT_EQ(ops->graph_replays(), replays + 1);
  }
}

// A workspace block freed while a pass is recorded (Rewind drops a block a layer added; Reset
// merges them) must not go while recorded calls still name it: they reach the stream first.
TEST(CudaGraphsTest, AWorkspaceBlockFreedMidPassOutlivesTheCallsThatUseIt) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto ops = NewGraphOps();
  ASSERT_NE(ops, nullptr);
  Workspace ws(1024, &ops->activation_memory());
  auto src = ToDevice(std::vector<float>(64, 1.0f));
  auto out = ToDevice(std::vector<float>(64, 0.0f));
  for (int pass = 0; pass < 4; ++pass) {
    ws.Reset();
    const Workspace::Mark mark = ws.GetMark();
    float* big = ws.Floats(4096);  // past the first block: a block of its own
    ops->CopyRows(src.get(), 64, 1, 64, big, 64);
    ops->AddRows(big, 64, 1, 64, out.get(), 64);
    ws.Rewind(mark);  // frees the block while the two calls above may still be recorded
    float* other = ws.Floats(4096);  // may get the freed block's address back
    ops->CopyRows(out.get(), 64, 1, 64, other, 64);
    ASSERT_EQ(ops->Synchronize(), "") << pass;
  }
  EXPECT_EQ(ToHost(out), std::vector<float>(64, 4.0f));
}

}  // namespace
}  // namespace tandem::kernels::cuda
