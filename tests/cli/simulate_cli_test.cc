// The external interface of `tandem simulate` and `tandem simulate-alloc`: exactly the
// documented JSON keys, deterministic output for a seed, and exit code 2 on bad usage.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "run_tandem.h"
#include "models/json_file.h"

namespace {

using Output = tandem::testing::TandemOutput;
using tandem::testing::RunTandem;

std::set<std::string> Keys(const std::string& text) {
  auto json = tandem::models::ParseJsonText(text, "stdout");
  std::set<std::string> keys;
  if (json.ok()) {
    for (const auto& [k, v] : json->items()) keys.insert(k);
  }
  return keys;
}

TEST(SimulateCliTest, SimulatePrintsExactlyTheDocumentedKeys) {
  const std::string args =
      "simulate --workload lmsys --seed 5 --model-spec jamba-1.5-mini --capacity-gb 2 "
      "--policy marconi --json";
  const Output o = RunTandem(args);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Keys(o.out), (std::set<std::string>{
                             "token_hit_rate", "flops_saved", "requests", "input_tokens",
                             "hit_tokens", "ssm_checkpoints_admitted", "evictions", "alpha_final",
                             "hit_rate_p5", "hit_rate_p50", "hit_rate_p95", "wall_seconds"}));
  // Same seed, same numbers (wall time aside).
  auto a = tandem::models::ParseJsonText(o.out, "a");
  auto b = tandem::models::ParseJsonText(RunTandem(args).out, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  a->erase("wall_seconds");
  b->erase("wall_seconds");
  EXPECT_EQ(*a, *b);
}

TEST(SimulateCliTest, ModelDirectoryGivesTheSpec) {
  const Output o =
      RunTandem("simulate --workload sharegpt --model-spec " + std::string(TANDEM_TEST_DATA) +
                "/models/zamba2-tiny --capacity-gb 0.05 --policy sglang-plus --json");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Keys(o.out).count("token_hit_rate"), 1u);
}

TEST(SimulateCliTest, SessionCountAndRateShapeTheWorkload) {
  const std::string base =
      "simulate --workload lmsys --model-spec jamba-1.5-mini --capacity-gb 2 --policy marconi "
      "--json";
  auto requests = [&](const std::string& extra) {
    const Output o = RunTandem(base + extra);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    auto json = tandem::models::ParseJsonText(o.out, "stdout");
    return json.ok() ? (*json)["requests"].get<int64_t>() : -1;
  };
  const int64_t ten = requests(" --sessions 10");
  const int64_t forty = requests(" --sessions 40 --sessions-per-second 4");
  EXPECT_GT(ten, 0);
  EXPECT_GT(forty, 2 * ten);
  EXPECT_EQ(RunTandem(base + " --sessions 0").exit_code, 2);
  EXPECT_EQ(RunTandem(base + " --sessions-per-second -1").exit_code, 2);
}

TEST(SimulateCliTest, SimulateAllocPrintsExactlyTheDocumentedKeys) {
  const Output o = RunTandem(
      "simulate-alloc --workload uniform_short --allocator avmp-dynamic --pool-gib 4 "
      "--model-spec jamba-1.5-mini --json");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Keys(o.out), (std::set<std::string>{"oom_events", "goodput", "peak_reserved_bytes",
                                                "migrations", "bytes_migrated"}));
}

TEST(SimulateCliTest, BadUsageExitsTwo) {
  for (const std::string args :
       {"simulate --workload lmsys --model-spec marconi-7b --capacity-gb 1 --policy lru",
        "simulate --workload nope --model-spec marconi-7b --capacity-gb 1 --policy marconi",
        "simulate-alloc --workload uniform_short --allocator fixed-dual:x --pool-gib 4 "
        "--model-spec marconi-7b"}) {
    const Output o = RunTandem(args);
    EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.err;
    EXPECT_FALSE(o.err.empty()) << args;
  }
}

}  // namespace
