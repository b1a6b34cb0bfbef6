// `tandem bench-engine` end to end on a fixture model: one JSON object per policy, the cache
// policies hit and `none` does not, and bad flags are refused with a message naming them.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli/run_tandem.h"

namespace tandem {
namespace {

using testing::RunTandem;

const std::string kModel = std::string(TANDEM_TEST_DATA) + "/models/jamba-tiny";

std::vector<nlohmann::json> JsonLines(const std::string& out) {
  std::vector<nlohmann::json> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

TEST(BenchEngineCliTest, MultiTurnReplayReportsEveryPolicy) {
  const auto o = RunTandem("bench-engine --model " + kModel +
                           " --sessions 3 --turns 3 --system-tokens 40 --user-tokens 20"
                           " --output-tokens 4 --sessions-per-second 100 --think-seconds 0"
                           " --threads 2 --json --policies none,sglang-plus,marconi");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto rows = JsonLines(o.out);
  ASSERT_EQ(rows.size(), 3u) << o.out;
  for (const auto& row : rows) {
    for (const char* key :
         {"policy", "requests", "failed", "ttft_p50_s", "ttft_p95_s", "output_tokens_per_s",
          "token_hit_rate", "preemptions", "alpha_final", "wall_seconds"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    EXPECT_EQ(row["requests"], 9);
    EXPECT_EQ(row["failed"], 0);
    EXPECT_GT(row["ttft_p95_s"].get<double>(), 0.0);
  }
  EXPECT_EQ(rows[0]["policy"], "none");
  EXPECT_EQ(rows[0]["token_hit_rate"].get<double>(), 0.0);
  // Later turns restore their session's history.
  EXPECT_GT(rows[1]["token_hit_rate"].get<double>(), 0.3);
  EXPECT_GT(rows[2]["token_hit_rate"].get<double>(), 0.3);
  EXPECT_LT(rows[2]["prefill_tokens_run"].get<int64_t>(),
            rows[0]["prefill_tokens_run"].get<int64_t>());
}

TEST(BenchEngineCliTest, ReplaysAMooncakeTrace) {
  const std::string trace = std::string(TANDEM_TEST_DATA) +
                            "/../../../shared/traces/"
                            "mooncake_synthetic_trace.jsonl";
  if (!std::ifstream(trace)) GTEST_SKIP() << "the shared Mooncake trace is not next to the repo";
  const auto o = RunTandem("bench-engine --model " + kModel + " --trace " + trace +
                           " --max-requests 6 --max-prompt-tokens 300 --max-output-tokens 3"
                           " --time-scale 0 --threads 2 --json --policies marconi");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto rows = JsonLines(o.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["requests"], 6);
  EXPECT_EQ(rows[0]["failed"], 0);
}

TEST(BenchEngineCliTest, BadFlagsExitTwoNamingTheFlag) {
  auto o = RunTandem("bench-engine --model " + kModel + " --policies none,bogus");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("bogus"), std::string::npos) << o.err;
  o = RunTandem("bench-engine --model " + kModel + " --sessions 0");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--sessions"), std::string::npos) << o.err;
  o = RunTandem("bench-engine --preset nope");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("nope"), std::string::npos) << o.err;
  o = RunTandem("bench-engine --model " + kModel + " --trace /nonexistent.jsonl");
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.err.find("nonexistent"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace tandem
