// The greedy choice (kernels/argmax.h) and the backends' argmax read-back, which must give it
// exactly: lowest index on ties, NaN passed over unless it comes first.
#include "kernels/argmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/kernels/batch_test_util.h"

namespace tandem::kernels {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  std::vector<float> row;
  int32_t want;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {{0.5f, 2.0f, -1.0f, 2.0f}, 1},      // tie: the lower index
      {{3.0f}, 0},                         // one value
      {{kNan, 5.0f, 7.0f}, 0},             // NaN first: 0
      {{1.0f, kNan, 4.0f, kNan, 4.0f}, 2},  // NaN later: passed over
      {{-kInf, -kInf, -kInf}, 0},          // all equal
      {{-1.0f, kInf, kInf, 9.0f}, 1},      // infinities
      {{-2.0f, -3.0f, -1.5f, -1.5f}, 2},   // negatives
  };
  return cases;
}

TEST(ArgmaxTest, IsTheLowestIndexOfTheLargestValueWithNanPassedOver) {
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    EXPECT_EQ(ArgmaxRow(c.row.data(), static_cast<int64_t>(c.row.size())), c.want) << "case " << i;
  }
}

TEST(ArgmaxTest, HostBackendsReadBackEachRowsArgmax) {
  // Every case padded to one width with -inf (which never wins over the case's own values
  // except the all -inf case, where index 0 still wins the tie), at a row stride beyond it.
  const int64_t cols = 6, ld = 9;
  std::vector<float> matrix(Cases().size() * ld, 123.0f);  // the stride's gap is never read
  for (size_t r = 0; r < Cases().size(); ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const std::vector<float>& row = Cases()[r].row;
      matrix[r * ld + c] = c < static_cast<int64_t>(row.size()) ? row[c] : -kInf;
    }
  }
  for (auto& ops : testing::HostBackends()) {
    std::vector<int32_t> got(Cases().size(), -1);
    EXPECT_EQ(ops->ReadBackArgmax(matrix.data(), ld, static_cast<int64_t>(Cases().size()), cols,
                                  got.data()),
              "");
    for (size_t r = 0; r < Cases().size(); ++r) {
      EXPECT_EQ(got[r], Cases()[r].want) << ops->name() << " case " << r;
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
