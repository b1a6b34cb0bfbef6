#include "server/logging/structured_log.h"

#include <atomic>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tandem::server {
namespace {

struct Settings {
  std::atomic<LogFormat> format{LogFormat::kText};
  std::atomic<LogLevel> min_level{LogLevel::kInfo};
  std::atomic<std::FILE*> sink{nullptr};  // null: stderr
  std::mutex write_mu;
};

Settings& Global() {
  static Settings* settings = new Settings();  // never destroyed: threads may log at exit
  return *settings;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

// JSON string escaping; also used for logfmt's quoted values, whose rules are the same for the
// characters that matter (quote, backslash, control characters).
void AppendQuoted(std::string* out, absl::string_view text) {
  out->push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

bool NeedsQuotes(absl::string_view text) {
  if (text.empty()) return true;
  for (unsigned char c : text) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) return true;
  }
  return false;
}

void AppendText(std::string* out, absl::string_view key, absl::string_view value, bool is_string) {
  absl::StrAppend(out, " ", key, "=");
  if (is_string && NeedsQuotes(value)) {
    AppendQuoted(out, value);
  } else {
    out->append(value.data(), value.size());
  }
}

void AppendJson(std::string* out, absl::string_view key, absl::string_view value, bool is_string) {
  out->append(",");
  AppendQuoted(out, key);
  out->append(":");
  if (is_string) {
    AppendQuoted(out, value);
  } else {
    out->append(value.data(), value.size());
  }
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("log level must be debug, info, warning or error, got '", name, "'"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "text") return LogFormat::kText;
  if (lower == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("log format must be text or json, got '", name, "'"));
}

void ConfigureLogging(LogFormat format, LogLevel min_level, std::FILE* sink) {
  Settings& s = Global();
  s.format = format;
  s.min_level = min_level;
  s.sink = sink;
}

bool LogEnabled(LogLevel level) { return level >= Global().min_level.load(); }

std::string FormatLogLine(LogFormat format, absl::string_view timestamp, LogLevel level,
                          absl::string_view message, const std::vector<LogField>& fields) {
  std::string line;
  if (format == LogFormat::kJson) {
    line = "{\"ts\":";
    AppendQuoted(&line, timestamp);
    AppendJson(&line, "level", LevelName(level), true);
    AppendJson(&line, "msg", message, true);
    for (const LogField& f : fields) AppendJson(&line, f.key, f.text, f.is_string);
    line.append("}\n");
  } else {
    absl::StrAppend(&line, "ts=", timestamp, " level=", LevelName(level));
    line.append(" msg=");
    AppendQuoted(&line, message);
    for (const LogField& f : fields) AppendText(&line, f.key, f.text, f.is_string);
    line.append("\n");
  }
  return line;
}

LogLine::LogLine(LogLevel level, absl::string_view message)
    : enabled_(LogEnabled(level)), level_(level) {
  if (enabled_) message_ = std::string(message);
}

LogLine::~LogLine() {
  if (!enabled_) return;
  Settings& s = Global();
  const std::string timestamp =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  const std::string line = FormatLogLine(s.format, timestamp, level_, message_, fields_);
  std::FILE* sink = s.sink.load();
  if (sink == nullptr) sink = stderr;
  std::lock_guard<std::mutex> lock(s.write_mu);
  std::fwrite(line.data(), 1, line.size(), sink);
  std::fflush(sink);
}

LogLine& LogLine::Field(absl::string_view key, absl::string_view value) {
  if (enabled_) fields_.push_back({std::string(key), std::string(value), true});
  return *this;
}

LogLine& LogLine::Field(absl::string_view key, int64_t value) {
  if (enabled_) fields_.push_back({std::string(key), absl::StrCat(value), false});
  return *this;
}

LogLine& LogLine::Field(absl::string_view key, double value) {
  // JSON has no NaN or infinity; a string keeps the line parseable.
  if (enabled_) {
    const bool finite = value == value && value - value == 0;
    fields_.push_back(
        {std::string(key), finite ? absl::StrFormat("%.6g", value) : absl::StrCat(value), !finite});
  }
  return *this;
}

LogLine& LogLine::Field(absl::string_view key, bool value) {
  if (enabled_) fields_.push_back({std::string(key), value ? "true" : "false", false});
  return *this;
}

}  // namespace tandem::server
