#include <gtest/gtest.h>

#include "kernels/backends.h"

namespace tandem::kernels {
namespace {

TEST(BackendsTest, FactoriesNameTheirBackends) {
  EXPECT_EQ(MakeReferenceOps()->name(), "reference");
  EXPECT_EQ(MakeCpuOps(2)->name(), "cpu");
}

}  // namespace
}  // namespace tandem::kernels
