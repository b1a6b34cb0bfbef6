// Structured log lines: logfmt quoting, JSON escaping that keeps every line parseable, levels.
#include "server/logging/structured_log.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::server {
namespace {

TEST(StructuredLogTest, TextLinesAreLogfmtWithQuotesOnlyWhereNeeded) {
  const std::string line = FormatLogLine(
      LogFormat::kText, "2026-11-24T05:30:00.123Z", LogLevel::kInfo, "request finished",
      {{"request_id", "req-7", true}, {"error", "bad \"top_p\" = 1.5", true},
       {"tokens", "12", false}, {"empty", "", true}});
  EXPECT_EQ(line,
            "ts=2026-11-24T05:30:00.123Z level=info msg=\"request finished\" request_id=req-7 "
            "error=\"bad \\\"top_p\\\" = 1.5\" tokens=12 empty=\"\"\n");
}

TEST(StructuredLogTest, JsonLinesParseBackWhateverTheFieldsHold) {
  const std::string hostile = std::string("line\nbreak \"quote\" back\\slash \x01 tab\t end");
  const std::string line =
      FormatLogLine(LogFormat::kJson, "2026-11-24T05:30:00.123Z", LogLevel::kWarning, "refused",
                    {{"request_id", hostile, true}, {"tokens", "12", false}});
  ASSERT_EQ(line.back(), '\n');
  ASSERT_EQ(line.find('\n'), line.size() - 1);  // one line
  nlohmann::json parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["level"], "warning");
  EXPECT_EQ(parsed["msg"], "refused");
  EXPECT_EQ(parsed["request_id"], hostile);
  EXPECT_EQ(parsed["tokens"], 12);
}

TEST(StructuredLogTest, LevelsFilterAndNonFiniteNumbersStayValidJson) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  ConfigureLogging(LogFormat::kJson, LogLevel::kWarning, sink);
  LogLine(LogLevel::kInfo, "dropped").Field("x", int64_t{1});
  LogLine(LogLevel::kError, "kept").Field("ratio", 0.0 / 0.0).Field("ok", true).Field("n", 3);
  ConfigureLogging(LogFormat::kText, LogLevel::kInfo);
  std::rewind(sink);
  char buffer[1024] = {};
  ASSERT_NE(std::fgets(buffer, sizeof(buffer), sink), nullptr);
  nlohmann::json parsed = nlohmann::json::parse(buffer);
  EXPECT_EQ(parsed["msg"], "kept");
  EXPECT_TRUE(parsed["ratio"].is_string());
  EXPECT_EQ(parsed["ok"], true);
  EXPECT_EQ(parsed["n"], 3);
  EXPECT_EQ(std::fgets(buffer, sizeof(buffer), sink), nullptr);  // "dropped" was not written
  std::fclose(sink);
}

TEST(StructuredLogTest, ParsesLevelAndFormatNames) {
  EXPECT_EQ(*ParseLogLevel("WARNING"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
  EXPECT_NE(ParseLogFormat("xml").status().message().find("'xml'"), std::string::npos);
}

}  // namespace
}  // namespace tandem::server
