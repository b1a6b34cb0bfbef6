#include "server/cli/config_sources.h"

#include <cstdlib>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/util/small_file.h"

namespace tandem::cli {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

const FlagSpec* FindSpec(const std::vector<FlagSpec>& specs, const std::string& name) {
  for (const FlagSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// A boolean flag is present or absent: true sets it, false leaves it unset.
absl::StatusOr<bool> ParseBool(const std::string& text, const std::string& where) {
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": '", text, "' is not a boolean (true/false)"));
}

absl::Status Apply(const FlagSpec& spec, const std::string& value, const std::string& where,
                   Args* args) {
  if (!spec.takes_value) {
    absl::StatusOr<bool> on = ParseBool(value, where);
    if (!on.ok()) return on.status();
    if (*on) args->SetIfAbsent(spec.name, "true", where);
    return absl::OkStatus();
  }
  args->SetIfAbsent(spec.name, value, where);
  return absl::OkStatus();
}

// Parses `flag = value` lines; a value may be double-quoted (keeps spaces and '#').
absl::StatusOr<std::map<std::string, std::pair<std::string, int>>> ReadConfigFile(
    const std::string& path, const std::vector<FlagSpec>& specs) {
  // A config file is a few dozen lines; the bound keeps /dev/zero or a misnamed log file from
  // being read without end, and a directory is refused by name rather than read as empty.
  absl::StatusOr<std::string> contents = server::ReadSmallFile(path, kMaxConfigBytes);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config file ", contents.status().message()));
  }
  std::map<std::string, std::pair<std::string, int>> entries;  // name -> value, line
  int number = 0;
  for (absl::string_view line : absl::StrSplit(*contents, '\n')) {
    ++number;
    const std::string where = absl::StrCat(path, ":", number);
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.front() == '#') continue;
    const size_t eq = text.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected 'flag = value'"));
    }
    absl::string_view key = absl::StripAsciiWhitespace(text.substr(0, eq));
    absl::ConsumePrefix(&key, "--");
    const std::string name(key);
    absl::string_view value = absl::StripAsciiWhitespace(text.substr(eq + 1));
    if (!value.empty() && value.front() == '"') {
      if (value.size() < 2 || value.back() != '"') {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unterminated quoted value"));
      }
      value = value.substr(1, value.size() - 2);
    } else if (const size_t hash = value.find('#'); hash != absl::string_view::npos) {
      value = absl::StripTrailingAsciiWhitespace(value.substr(0, hash));
    }
    if (name == "config" || FindSpec(specs, name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown setting '", name, "'"));
    }
    if (!entries.emplace(name, std::make_pair(std::string(value), number)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", name, "' set twice"));
    }
  }
  return entries;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::string EnvironmentName(const std::string& flag) {
  std::string name = absl::StrCat("TANDEM_", absl::AsciiStrToUpper(flag));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

absl::Status FillFromEnvironmentAndFile(const std::vector<FlagSpec>& specs, const EnvLookup& env,
                                        Args* args) {
  for (const FlagSpec& spec : specs) {
    if (spec.name == "help" || args->Has(spec.name)) continue;
    const std::string var = EnvironmentName(spec.name);
    if (std::optional<std::string> value = env(var)) {
      if (absl::Status s = Apply(spec, *value, var, args); !s.ok()) return s;
    }
  }
  std::optional<std::string> path = args->String("config");
  if (!path || FindSpec(specs, "config") == nullptr) return absl::OkStatus();
  absl::StatusOr<std::map<std::string, std::pair<std::string, int>>> entries =
      ReadConfigFile(*path, specs);
  if (!entries.ok()) return entries.status();
  for (const auto& [name, value_and_line] : *entries) {
    const std::string where = absl::StrCat(*path, ":", value_and_line.second);
    if (absl::Status s = Apply(*FindSpec(specs, name), value_and_line.first, where, args);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::cli
