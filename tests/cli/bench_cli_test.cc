// `tandem bench` against a real `tandem serve` on loopback: generated multi-turn sessions in a
// closed loop and in an open (Poisson) loop, a Mooncake trace at its timestamps, the report's
// contents, and errors counted instead of crashing.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli/run_tandem.h"
#include "tests/cli/serve_process.h"

namespace tandem {
namespace {

using testing::RunTandem;
using testing::ServeProcess;
using testing::TestData;

class BenchCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess(
        {"--model", TestData("models/zamba2-tiny"), "--threads", "2", "--memory-gib", "0.1"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()) << "tandem serve did not start"; }

  // Runs `tandem bench --json` with `flags` and parses its report.
  static nlohmann::json BenchJson(const std::string& flags) {
    const auto o = RunTandem("bench --address " + server_->address() + " --json " + flags);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    if (o.exit_code != 0) return nlohmann::json::object();
    return nlohmann::json::parse(o.out);
  }

  static ServeProcess* server_;
};

ServeProcess* BenchCliTest::server_ = nullptr;

void ExpectPercentiles(const nlohmann::json& report, const char* key) {
  ASSERT_TRUE(report.contains(key)) << key;
  for (const char* q : {"p50", "p95", "p99", "mean"}) {
    ASSERT_TRUE(report[key].contains(q)) << key << "." << q;
  }
  EXPECT_LE(report[key]["p50"].get<double>(), report[key]["p95"].get<double>()) << key;
  EXPECT_LE(report[key]["p95"].get<double>(), report[key]["p99"].get<double>()) << key;
}

TEST_F(BenchCliTest, ClosedLoopSessionsReportLatenciesAndHitTheCache) {
  const nlohmann::json r = BenchJson(
      "--concurrency 4 --requests 16 --turns 4 --system-tokens 48 --user-tokens 16 "
      "--max-new-tokens 4");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["requests"], 16);
  EXPECT_EQ(r["ok"], 16);
  EXPECT_EQ(r["errors"], 0) << r.dump();
  EXPECT_EQ(r["max_in_flight"], 4);
  EXPECT_EQ(r["output_tokens"], 16 * 4);  // every request generates max-new-tokens
  ExpectPercentiles(r, "ttft_s");
  ExpectPercentiles(r, "inter_token_s");
  ExpectPercentiles(r, "e2e_s");
  EXPECT_GT(r["ttft_s"]["p50"].get<double>(), 0);
  EXPECT_GE(r["e2e_s"]["p50"].get<double>(), r["ttft_s"]["p50"].get<double>());
  EXPECT_GT(r["output_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(r["requests_per_s"].get<double>(), 0);
  // Sessions share the system prompt, and later turns extend earlier ones.
  EXPECT_GT(r["cached_tokens"].get<int64_t>(), 0);
  EXPECT_GT(r["token_hit_rate"].get<double>(), 0);
  EXPECT_LE(r["token_hit_rate"].get<double>(), 1);
}

TEST_F(BenchCliTest, OpenLoopPoissonArrivals) {
  const nlohmann::json r = BenchJson(
      "--rate 200 --requests 12 --turns 3 --system-tokens 32 --user-tokens 8 --max-new-tokens 3");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["ok"], 12);
  EXPECT_EQ(r["errors"], 0) << r.dump();
  EXPECT_NE(r["load"].get<std::string>().find("Poisson"), std::string::npos);
}

TEST_F(BenchCliTest, ASessionHeaderIsSentWithoutDisturbingTheServer) {
  // What the header carries is checked against a fake server in client_test; here, that the
  // real server accepts calls carrying it.
  const nlohmann::json r = BenchJson(
      "--session-header x-session-id --concurrency 2 --requests 4 --system-tokens 16 "
      "--user-tokens 8 --max-new-tokens 2");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["ok"], 4) << r.dump();
}

TEST_F(BenchCliTest, TableReportNamesEveryFigure) {
  const auto o = RunTandem("bench --address " + server_->address() +
                           " --concurrency 2 --requests 4 --system-tokens 16 --user-tokens 8"
                           " --max-new-tokens 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  for (const char* text : {"4 sent, 4 ok, 0 failed", "TTFT", "inter-token", "end-to-end", "p50",
                           "p95", "p99", "requests/s", "output tokens/s", "token hit rate"}) {
    EXPECT_NE(o.out.find(text), std::string::npos) << text << "\n" << o.out;
  }
}

// A Mooncake-format trace written here, so that the test never depends on the shared folder:
// every request starts with the same 512-token block, and the last repeats the first. (Block
// ids far above the shared trace's, so that no other test's requests share these prefixes.)
TEST_F(BenchCliTest, ReplaysAMooncakeTrace) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tandem_bench_trace_" + std::to_string(::getpid()) + ".jsonl"))
                               .string();
  {
    std::ofstream trace(path);
    auto line = [&](int ms, int input, int output, std::vector<int> blocks) {
      trace << nlohmann::json{{"timestamp", ms},
                              {"input_length", input},
                              {"output_length", output},
                              {"hash_ids", blocks}}
                   .dump()
            << "\n";
    };
    line(0, 600, 5, {900000, 900001});
    line(20, 700, 3, {900000, 900002});
    line(40, 520, 4, {900000, 900003});
    line(60, 600, 2, {900000, 900001});
  }
  // One at a time: the second request leaves a checkpoint where it leaves the first one's
  // tokens, the end of the shared block, and the later ones restore it. So the trace's shared
  // blocks reach the server as shared token ids.
  nlohmann::json r = BenchJson("--trace " + path + " --concurrency 1 --max-new-tokens 2");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["requests"], 4);  // the whole trace: shorter than the default request cap
  EXPECT_EQ(r["ok"], 4);
  EXPECT_EQ(r["errors"], 0) << r.dump();
  EXPECT_GE(r["cached_tokens"].get<int64_t>(), 2 * 512) << r.dump();
  EXPECT_GT(r["token_hit_rate"].get<double>(), 0);
  // At the trace's own (scaled) timestamps.
  r = BenchJson("--trace " + path + " --time-scale 0.01 --max-new-tokens 4");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["ok"], 4);
  EXPECT_EQ(r["errors"], 0) << r.dump();
  EXPECT_EQ(r["output_tokens"], 4 + 3 + 4 + 2);  // the trace's lengths 5, 3, 4, 2 capped at 4
  EXPECT_NE(r["load"].get<std::string>().find("timestamps"), std::string::npos);
  std::filesystem::remove(path);
}

TEST_F(BenchCliTest, ReplaysTheSharedMooncakeTrace) {
  const std::string trace =
      std::string(TANDEM_TEST_DATA) + "/../../../shared/traces/mooncake_synthetic_trace.jsonl";
  if (!std::ifstream(trace)) GTEST_SKIP() << "the shared Mooncake trace is not next to the repo";
  const nlohmann::json r = BenchJson("--trace " + trace +
                                     " --requests 6 --max-prompt-tokens 300 --max-new-tokens 3"
                                     " --time-scale 0.001");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["requests"], 6);
  EXPECT_EQ(r["ok"], 6);
  EXPECT_EQ(r["errors"], 0) << r.dump();
}

TEST_F(BenchCliTest, FailedRequestsAreCountedByCode) {
  // bench fits its requests to the server's limits, so make them fail with a deadline that has
  // passed by the time each call starts.
  const nlohmann::json r = BenchJson(
      "--concurrency 2 --requests 4 --system-tokens 16 --user-tokens 8 --max-new-tokens 2 "
      "--timeout 0.000001");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["requests"], 4);
  EXPECT_EQ(r["ok"], 0);
  EXPECT_EQ(r["errors"], 4);
  EXPECT_EQ(r["errors_by_code"]["DEADLINE_EXCEEDED"], 4) << r.dump();
}

TEST(BenchCliErrorsTest, BadFlagsAndAMissingServer) {
  auto o = RunTandem("bench --rate 5 --concurrency 2");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--rate"), std::string::npos) << o.err;
  o = RunTandem("bench --concurrency 0");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--concurrency"), std::string::npos) << o.err;
  for (const char* bad : {"X-Session", "grpc-session", "authorization", "a:b"}) {
    o = RunTandem(std::string("bench --session-header ") + bad);
    EXPECT_EQ(o.exit_code, 2) << bad;
    EXPECT_NE(o.err.find("--session-header \"" + std::string(bad) + "\""), std::string::npos)
        << o.err;
  }
  o = RunTandem("bench --address 127.0.0.1:1 --requests 1");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("UNAVAILABLE"), std::string::npos) << o.err;
  o = RunTandem("bench --help");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* flag : {"--trace", "--rate", "--concurrency", "--duration", "--requests",
                           "--time-scale", "--json", "--tls-ca", "--token"}) {
    EXPECT_NE(o.out.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace tandem
