#include "server/util/bearer_tokens.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::server {
namespace {

bool IsTokenChar(char c) { return c > 0x20 && c < 0x7f && c != ':'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-'; }

absl::Status CheckToken(absl::string_view token, const std::string& where) {
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": empty token"));
  for (char c : token) {
    if (!IsTokenChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a token is printable ASCII without spaces or ':'"));
    }
  }
  return absl::OkStatus();
}

// 0 when equal; never exits early on the first difference. `expected` is not empty.
unsigned char Difference(absl::string_view given, absl::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return diff;
}

}  // namespace

absl::StatusOr<BearerTokens> BearerTokens::Single(absl::string_view token) {
  token = absl::StripAsciiWhitespace(token);
  if (absl::Status s = CheckToken(token, "auth token"); !s.ok()) return s;
  BearerTokens tokens;
  tokens.entries_.push_back({"default", std::string(token)});
  return tokens;
}

absl::StatusOr<BearerTokens> BearerTokens::Parse(absl::string_view text,
                                                 const std::string& source) {
  BearerTokens tokens;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = absl::StrCat(source, ":", number);
    Entry entry;
    if (const size_t colon = line.find(':'); colon != absl::string_view::npos) {
      entry.name = std::string(line.substr(0, colon));
      entry.token = std::string(line.substr(colon + 1));
      if (entry.name.empty() || entry.name.size() > 64 ||
          !std::all_of(entry.name.begin(), entry.name.end(), IsNameChar)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": a caller name is 1 to 64 of A-Z a-z 0-9 . _ -"));
      }
    } else {
      entry.name = absl::StrCat("token-", number);
      entry.token = std::string(line);
    }
    if (absl::Status s = CheckToken(entry.token, where); !s.ok()) return s;
    for (const Entry& other : tokens.entries_) {
      if (other.name == entry.name) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": caller name '", entry.name, "' is used twice"));
      }
      if (other.token == entry.token) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": the same token as caller '", other.name, "'"));
      }
    }
    tokens.entries_.push_back(std::move(entry));
  }
  if (tokens.entries_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no token in the file"));
  }
  return tokens;
}

absl::StatusOr<std::string> BearerTokens::Authenticate(
    std::optional<absl::string_view> header) const {
  if (!header.has_value()) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>'");
  }
  constexpr absl::string_view kScheme = "bearer ";
  if (header->size() < kScheme.size() ||
      !absl::EqualsIgnoreCase(header->substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError("authorization is not of the form 'Bearer <token>'");
  }
  const absl::string_view given = absl::StripAsciiWhitespace(header->substr(kScheme.size()));
  const Entry* match = nullptr;
  for (const Entry& entry : entries_) {
    // Every token is compared, so the time does not tell which one matched.
    if (Difference(given, entry.token) == 0) match = &entry;
  }
  if (match == nullptr) return absl::UnauthenticatedError("invalid bearer token");
  return match->name;
}

}  // namespace tandem::server
