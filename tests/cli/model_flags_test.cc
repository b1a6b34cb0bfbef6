// The engine's kernels from --fast-kernels: batch-invariant unless it is given, and
// --gpu-tensor-cores refused without it (the batch-invariant kernels would ignore it).
#include "server/cli/model_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::cli {
namespace {

Args Parse(std::vector<std::string> argv) {
  static const std::vector<FlagSpec> specs = {FastKernelsFlagSpec(), GpuTensorCoresFlagSpec()};
  argv.insert(argv.begin(), "serve");
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  absl::StatusOr<Args> args = Args::Parse(static_cast<int>(raw.size()), raw.data(), specs);
  EXPECT_TRUE(args.ok()) << args.status();
  return *std::move(args);
}

TEST(ModelFlagsTest, KernelsAreBatchInvariantUnlessFastKernelsIsGiven) {
  absl::StatusOr<bool> invariant = ReadBatchInvariant(Parse({}), false);
  ASSERT_TRUE(invariant.ok()) << invariant.status();
  EXPECT_TRUE(*invariant);
  invariant = ReadBatchInvariant(Parse({"--fast-kernels"}), false);
  ASSERT_TRUE(invariant.ok()) << invariant.status();
  EXPECT_FALSE(*invariant);
}

TEST(ModelFlagsTest, TensorCoresNeedFastKernels) {
  const absl::StatusOr<bool> refused = ReadBatchInvariant(Parse({"--gpu-tensor-cores"}), true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--gpu-tensor-cores needs --fast-kernels"),
            std::string::npos)
      << refused.status();
  const absl::StatusOr<bool> fast =
      ReadBatchInvariant(Parse({"--gpu-tensor-cores", "--fast-kernels"}), true);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_FALSE(*fast);
}

}  // namespace
}  // namespace tandem::cli
