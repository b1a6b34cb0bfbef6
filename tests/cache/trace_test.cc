#include "cache/trace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace tandem::cache {
namespace {

TEST(TraceTest, MooncakeBlocksExpandDeterministically) {
  const std::string text =
      "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 3, \"hash_ids\": [7, 8]}\n"
      "\n"
      "{\"timestamp\": 1500, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [7, 9]}\n";
  auto t = ParseMooncakeTrace(text, "mem");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_DOUBLE_EQ(t->requests[1].arrival_s, 1.5);
  std::vector<TokenId> in0, out0, in1, out1;
  t->Tokens(0, &in0, &out0);
  t->Tokens(1, &in1, &out1);
  ASSERT_EQ(in0.size(), 1000u);
  ASSERT_EQ(in1.size(), 600u);
  EXPECT_EQ(out0.size(), 3u);
  // Block 7 is shared: the first 512 tokens agree, block 8 vs 9 differ.
  EXPECT_TRUE(std::equal(in0.begin(), in0.begin() + 512, in1.begin()));
  EXPECT_NE(std::vector<TokenId>(in0.begin() + 512, in0.begin() + 600),
            std::vector<TokenId>(in1.begin() + 512, in1.end()));
  EXPECT_NE(out0, std::vector<TokenId>(out1.begin(), out1.end()));
  EXPECT_EQ(in0[3], MooncakeToken(7, 3));
}

TEST(TraceTest, MalformedLinesNameTheLineAndField) {
  struct Case {
    std::string text;
    std::string want;
  } cases[] = {
      {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n{oops",
       "mem:2: not valid JSON"},
      {"[1,2]", "mem:1: expected a JSON object"},
      {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}",
       "mem:1: missing field 'hash_ids'"},
      {"{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [1]}",
       "mem:1: field 'hash_ids' has 1 blocks"},
      {"{\"timestamp\": -5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
       "mem:1: field 'timestamp'"},
      {"{\"timestamp\": 0, \"input_length\": \"x\", \"output_length\": 1, \"hash_ids\": [1]}",
       "mem:1: field 'input_length'"},
      {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [-1]}",
       "mem:1: field 'hash_ids'[0]"},
      {"{\"timestamp\": 0, \"input_length\": 99999999999, \"output_length\": 1, \"hash_ids\": []}",
       "mem:1: field 'input_length' is 99999999999"},
  };
  for (const Case& c : cases) {
    auto t = ParseMooncakeTrace(c.text, "mem");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.want), std::string::npos) << t.status();
  }
}

TEST(TraceTest, SessionFormat) {
  const std::string text =
      "{\"session_id\": \"a\", \"turn_id\": 0, \"ts\": 0.5, \"input_tokens\": [1, 2, 3], "
      "\"output_tokens\": [4], \"num_input_tokens\": 3}\n"
      "{\"session_id\": 5, \"turn_id\": 1, \"ts\": 1, \"input_tokens\": [1, 2, 3, 4, 5], "
      "\"output_tokens\": []}\n";
  auto t = ParseSessionTrace(text, "s");
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<TokenId> in, out;
  t->Tokens(1, &in, &out);
  EXPECT_EQ(in, (std::vector<TokenId>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(t->total_input_tokens(), 8u);

  auto bad = ParseSessionTrace(
      "{\"session_id\": 1, \"turn_id\": 0, \"ts\": 0, \"input_tokens\": [1, \"x\"], "
      "\"output_tokens\": []}",
      "s");
  EXPECT_NE(bad.status().message().find("s:1: field 'input_tokens'[1]"), std::string::npos)
      << bad.status();
  auto count = ParseSessionTrace(
      "{\"session_id\": 1, \"turn_id\": 0, \"ts\": 0, \"input_tokens\": [1], "
      "\"output_tokens\": [], \"num_input_tokens\": 2}",
      "s");
  EXPECT_NE(count.status().message().find("num_input_tokens"), std::string::npos);
}

TEST(TraceTest, ReadTraceDetectsTheFormatAndReportsMissingFiles) {
  EXPECT_EQ(ReadTrace("/nonexistent/trace.jsonl").status().code(), absl::StatusCode::kNotFound);
  const std::string path = ::testing::TempDir() + "/trace_test.jsonl";
  {
    std::ofstream f(path);
    f << "\n{\"foo\": 1}\n";
  }
  auto t = ReadTrace(path);
  EXPECT_NE(t.status().message().find(":2: unknown trace format"), std::string::npos) << t.status();
  std::remove(path.c_str());
}

TEST(TraceTest, TheShippedMooncakeTraceParses) {
  const std::string path =
      std::string(TANDEM_TEST_DATA) + "/../../../shared/traces/mooncake_synthetic_trace.jsonl";
  std::ifstream probe(path);
  if (!probe) GTEST_SKIP() << "no shared trace at " << path;
  auto t = ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 3993u);
  EXPECT_NEAR(double(t->total_input_tokens()) / t->size(), 15325, 1);
}

}  // namespace
}  // namespace tandem::cache
