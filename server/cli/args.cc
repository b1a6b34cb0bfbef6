#include "server/cli/args.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::cli {

absl::StatusOr<Args> Args::Parse(int argc, char** argv, const std::vector<FlagSpec>& specs) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (args.values_.count(name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " given twice"));
    }
    if (!spec->takes_value) {
      if (inline_value) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      }
      args.values_[name] = "true";
    } else if (inline_value) {
      args.values_[name] = *inline_value;
    } else if (i + 1 < argc) {
      args.values_[name] = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
    }
  }
  return args;
}

std::optional<std::string> Args::String(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::Source(const std::string& name) const {
  auto it = sources_.find(name);
  return it == sources_.end() ? absl::StrCat("--", name) : it->second;
}

absl::StatusOr<std::optional<int64_t>> Args::Int(const std::string& name) const {
  auto s = String(name);
  if (!s) return std::optional<int64_t>();
  int64_t v;
  if (!absl::SimpleAtoi(*s, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Source(name), ": '", *s, "' is not an integer"));
  }
  return std::optional<int64_t>(v);
}

absl::StatusOr<int64_t> Args::IntIn(const std::string& name, int64_t lo, int64_t hi,
                                    int64_t fallback) const {
  absl::StatusOr<std::optional<int64_t>> value = Int(name);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return fallback;
  if (**value < lo || **value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(Source(name), " must be in [", lo, ", ", hi, "], got ", **value));
  }
  return **value;
}

absl::StatusOr<std::optional<double>> Args::Double(const std::string& name) const {
  auto s = String(name);
  if (!s) return std::optional<double>();
  double v;
  if (!absl::SimpleAtod(*s, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Source(name), ": '", *s, "' is not a number"));
  }
  return std::optional<double>(v);
}

absl::StatusOr<std::optional<std::vector<int64_t>>> Args::IntList(const std::string& name) const {
  auto s = String(name);
  if (!s) return std::optional<std::vector<int64_t>>();
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(*s, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Source(name), ": '", std::string(part), "' is not an integer"));
    }
    out.push_back(v);
  }
  return std::optional<std::vector<int64_t>>(std::move(out));
}

std::string Usage(const std::string& command, const std::string& synopsis,
                  const std::vector<FlagSpec>& specs) {
  std::string out = absl::StrCat("Usage: tandem ", command, " ", synopsis, "\n\nFlags:\n");
  for (const FlagSpec& s : specs) {
    std::string flag = absl::StrCat("  --", s.name, s.takes_value ? " VALUE" : "");
    if (flag.size() < 28) flag.resize(28, ' ');
    absl::StrAppend(&out, flag, " ", s.help, "\n");
  }
  return out;
}

}  // namespace tandem::cli
