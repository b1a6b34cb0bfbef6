#include "models/json_file.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::models {
namespace {

// Rewrites Python's non-finite literals into forms nlohmann::json accepts: ±Infinity becomes
// ±DBL_MAX (nlohmann refuses numbers that overflow), NaN becomes null (no field we read may
// legitimately be NaN).
std::string ReplacePythonLiterals(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out.push_back(ch);
      if (ch == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out.push_back(ch);
    } else if (text.substr(i, 8) == "Infinity") {
      out += "1.7976931348623157e308";
      i += 7;
    } else if (text.substr(i, 3) == "NaN") {
      out += "null";
      i += 2;
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonText(std::string_view text, const std::string& source) {
  nlohmann::json json = nlohmann::json::parse(ReplacePythonLiterals(text), nullptr,
                                              /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    // Parse again with exceptions only to recover nlohmann's description of the error.
    try {
      const nlohmann::json unused = nlohmann::json::parse(ReplacePythonLiterals(text));
      (void)unused;
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", e.what()));
    }
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON"));
  }
  return json;
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ParseJsonText(buffer.str(), path);
}

}  // namespace tandem::models
