// Structured logs for the server: one line per event on stderr, either logfmt
//   ts=2026-11-24T05:30:00.123Z level=info msg="request finished" request_id=req-7 code=OK
// or JSON lines (for log shippers), with the same fields. A line is built with chained fields
// and written, whole and in one write, when the LogLine goes out of scope:
//   LogLine(LogLevel::kInfo, "request finished").Field("request_id", id).Field("tokens", n);
// Thread-safe; lines from different threads never interleave.
#ifndef TANDEM_SERVER_LOGGING_STRUCTURED_LOG_H_
#define TANDEM_SERVER_LOGGING_STRUCTURED_LOG_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);    // debug|info|warning|error
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);  // text|json

// Process-wide settings; the defaults are info and text on stderr. `sink` must stay open.
void ConfigureLogging(LogFormat format, LogLevel min_level, std::FILE* sink = stderr);
bool LogEnabled(LogLevel level);

struct LogField {
  std::string key;
  std::string text;
  bool is_string = true;  // quoted in JSON (and in logfmt when it has spaces or quotes)
};

class LogLine {
 public:
  LogLine(LogLevel level, absl::string_view message);
  ~LogLine();  // writes the line (if the level is enabled)
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;

  LogLine& Field(absl::string_view key, absl::string_view value);
  LogLine& Field(absl::string_view key, const char* value) {
    return Field(key, absl::string_view(value));
  }
  LogLine& Field(absl::string_view key, const std::string& value) {
    return Field(key, absl::string_view(value));
  }
  LogLine& Field(absl::string_view key, int64_t value);
  LogLine& Field(absl::string_view key, int value) { return Field(key, int64_t{value}); }
  LogLine& Field(absl::string_view key, double value);
  LogLine& Field(absl::string_view key, bool value);

 private:
  const bool enabled_;
  const LogLevel level_;
  std::string message_;
  std::vector<LogField> fields_;
};

// One line, newline included, as LogLine writes it (exposed for tests).
std::string FormatLogLine(LogFormat format, absl::string_view timestamp, LogLevel level,
                          absl::string_view message, const std::vector<LogField>& fields);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_LOGGING_STRUCTURED_LOG_H_
