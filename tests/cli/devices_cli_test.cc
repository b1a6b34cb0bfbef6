// `tandem devices`: the CPU, whether cuBLAS loads (CUDA builds), and the GPUs, on any machine.
#include <string>

#include "gtest/gtest.h"
#include "run_tandem.h"

namespace {

using tandem::testing::RunTandem;

bool CudaBuild(const std::string& out) {
  return out.find("this build has no CUDA support") == std::string::npos;
}

TEST(DevicesCliTest, ListsTheCpuAndSaysWhetherCublasLoads) {
  const auto o = RunTandem("devices");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("cpu: "), std::string::npos) << o.out;
  if (CudaBuild(o.out)) {
    EXPECT_NE(o.out.find("cublas: "), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("cuda"), std::string::npos) << o.out;
  }
}

TEST(DevicesCliTest, ACublasThatCannotBeOpenedIsNamed) {
  const auto o = RunTandem("devices");
  if (!CudaBuild(o.out)) GTEST_SKIP() << "no CUDA in this build";
  const auto named = RunTandem("devices", "TANDEM_CUBLAS=/nonexistent/libcublas.so.13");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_NE(named.out.find("cublas: not loaded (TANDEM_CUBLAS: "), std::string::npos) << named.out;
  EXPECT_NE(named.out.find("/nonexistent/libcublas.so.13"), std::string::npos) << named.out;
}

}  // namespace
