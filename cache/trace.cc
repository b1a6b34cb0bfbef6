#include "cache/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem::cache {
namespace {

using Json = nlohmann::json;

// Tokens per request beyond which a line is rejected rather than trusted (memory safety).
constexpr uint64_t kMaxTokens = uint64_t{1} << 24;
constexpr uint64_t kOutputSalt = 0x6f75747075747321ull;

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

TokenId OutputToken(uint64_t seed, uint32_t offset) {
  return static_cast<TokenId>(Mix(Mix(seed ^ kOutputSalt) + offset) & 0x3fffffff);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open trace '", path, "'"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading trace '", path, "'"));
  return ss.str();
}

// Calls fn(line_number, object) for each non-blank line; stops at the first error.
template <typename Fn>
absl::Status ForEachLine(const std::string& text, const std::string& source, Fn fn) {
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    auto where = [&] { return absl::StrCat(source, ":", line_no, ": "); };
    if (j.is_discarded())
      return absl::InvalidArgumentError(absl::StrCat(where(), "not valid JSON"));
    if (!j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "expected a JSON object"));
    }
    if (absl::Status s = fn(j); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Count(const Json& j, const char* key, uint64_t max) {
  auto it = j.find(key);
  if (it == j.end()) return absl::InvalidArgumentError(absl::StrCat("missing field '", key, "'"));
  if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", key, "' must be a non-negative integer"));
  }
  const uint64_t v = it->get<uint64_t>();
  if (v > max) {
    return absl::InvalidArgumentError(absl::StrCat("field '", key, "' is ", v, ", above ", max));
  }
  return v;
}

absl::StatusOr<double> Seconds(const Json& j, const char* key, double scale) {
  auto it = j.find(key);
  if (it == j.end()) return absl::InvalidArgumentError(absl::StrCat("missing field '", key, "'"));
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat("field '", key, "' must be a number"));
  }
  const double v = it->get<double>() * scale;
  if (!std::isfinite(v) || v < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", key, "' must be a finite non-negative number"));
  }
  return v;
}

absl::Status Tokens(const Json& j, const char* key, std::vector<TokenId>* out) {
  auto it = j.find(key);
  if (it == j.end()) return absl::InvalidArgumentError(absl::StrCat("missing field '", key, "'"));
  if (!it->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("field '", key, "' must be an array"));
  }
  if (it->size() > kMaxTokens) {
    return absl::InvalidArgumentError(absl::StrCat("field '", key, "' has too many tokens"));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& t = (*it)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", key, "'[", i, "] must be a token id in [0, 2^31)"));
    }
    out->push_back(static_cast<TokenId>(t.get<int64_t>()));
  }
  return absl::OkStatus();
}

}  // namespace

TokenId MooncakeToken(uint32_t hash_id, uint32_t offset) {
  return static_cast<TokenId>(Mix((uint64_t{hash_id} << 32) | offset) & 0x3fffffff);
}

void Trace::Tokens(size_t i, std::vector<TokenId>* input, std::vector<TokenId>* output) const {
  const TraceRequest& r = requests[i];
  input->clear();
  output->clear();
  if (!r.blocks.empty() || streams.empty()) {
    input->reserve(r.input_tokens);
    for (size_t t = 0; t < r.input_tokens; ++t) {
      input->push_back(MooncakeToken(r.blocks[t / kMooncakeBlockTokens],
                                     static_cast<uint32_t>(t % kMooncakeBlockTokens)));
    }
    output->reserve(r.output_tokens);
    for (size_t t = 0; t < r.output_tokens; ++t) {
      output->push_back(OutputToken(r.output_seed, static_cast<uint32_t>(t)));
    }
    return;
  }
  const std::vector<TokenId>& s = streams[r.stream];
  input->assign(s.begin(), s.begin() + r.input_tokens);
  output->assign(s.begin() + r.input_tokens, s.begin() + r.input_tokens + r.output_tokens);
}

uint64_t Trace::total_input_tokens() const {
  uint64_t n = 0;
  for (const TraceRequest& r : requests) n += r.input_tokens;
  return n;
}

absl::StatusOr<Trace> ParseMooncakeTrace(const std::string& text, const std::string& source) {
  Trace trace;
  trace.name = source;
  uint64_t line_index = 0;
  absl::Status s = ForEachLine(text, source, [&](const Json& j) -> absl::Status {
    TraceRequest r;
    auto ts = Seconds(j, "timestamp", 1e-3);
    if (!ts.ok()) return ts.status();
    auto in = Count(j, "input_length", kMaxTokens);
    if (!in.ok()) return in.status();
    auto out = Count(j, "output_length", kMaxTokens);
    if (!out.ok()) return out.status();
    auto ids = j.find("hash_ids");
    if (ids == j.end()) return absl::InvalidArgumentError("missing field 'hash_ids'");
    if (!ids->is_array()) return absl::InvalidArgumentError("field 'hash_ids' must be an array");
    const uint64_t want = (*in + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens;
    if (ids->size() != want) {
      return absl::InvalidArgumentError(absl::StrCat("field 'hash_ids' has ", ids->size(),
                                                     " blocks but input_length ", *in, " needs ",
                                                     want, " blocks of 512"));
    }
    for (size_t i = 0; i < ids->size(); ++i) {
      const Json& h = (*ids)[i];
      if (!h.is_number_integer() || h.get<int64_t>() < 0 || h.get<int64_t>() > UINT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat("field 'hash_ids'[", i, "] must be an integer in [0, 2^32)"));
      }
      r.blocks.push_back(static_cast<uint32_t>(h.get<int64_t>()));
    }
    r.arrival_s = *ts;
    r.session = line_index;
    r.input_tokens = *in;
    r.output_tokens = *out;
    r.output_seed = line_index++;
    trace.requests.push_back(std::move(r));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  // A request with no input has no blocks; Tokens() still works (input_tokens is 0).
  return trace;
}

absl::StatusOr<Trace> ParseSessionTrace(const std::string& text, const std::string& source) {
  Trace trace;
  trace.name = source;
  absl::Status s = ForEachLine(text, source, [&](const Json& j) -> absl::Status {
    TraceRequest r;
    auto sid = j.find("session_id");
    if (sid == j.end()) return absl::InvalidArgumentError("missing field 'session_id'");
    if (sid->is_string()) {
      r.session = Fnv1a(sid->get<std::string>());
    } else if (sid->is_number_integer()) {
      r.session = static_cast<uint64_t>(sid->get<int64_t>());
    } else {
      return absl::InvalidArgumentError("field 'session_id' must be a string or an integer");
    }
    auto turn = Count(j, "turn_id", UINT32_MAX);
    if (!turn.ok()) return turn.status();
    auto ts = Seconds(j, "ts", 1.0);
    if (!ts.ok()) return ts.status();
    std::vector<TokenId> tokens;
    if (absl::Status t = Tokens(j, "input_tokens", &tokens); !t.ok()) return t;
    const size_t n_in = tokens.size();
    if (absl::Status t = Tokens(j, "output_tokens", &tokens); !t.ok()) return t;
    for (const char* key : {"num_input_tokens", "num_output_tokens"}) {
      if (!j.contains(key)) continue;
      auto n = Count(j, key, kMaxTokens);
      if (!n.ok()) return n.status();
      const size_t have = key[4] == 'i' ? n_in : tokens.size() - n_in;
      if (*n != have) {
        return absl::InvalidArgumentError(
            absl::StrCat("field '", key, "' is ", *n, " but the token list has ", have));
      }
    }
    r.turn = static_cast<uint32_t>(*turn);
    r.arrival_s = *ts;
    r.input_tokens = n_in;
    r.output_tokens = tokens.size() - n_in;
    r.stream = static_cast<uint32_t>(trace.streams.size());
    trace.streams.push_back(std::move(tokens));
    trace.requests.push_back(std::move(r));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return trace;
}

absl::StatusOr<Trace> ReadMooncakeTrace(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseMooncakeTrace(*text, path);
}

absl::StatusOr<Trace> ReadSessionTrace(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseSessionTrace(*text, path);
}

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const size_t first = text->find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the trace is empty"));
  }
  const size_t end = text->find('\n', first);
  const std::string line = text->substr(first, end == std::string::npos ? end : end - first);
  const size_t line_no = 1 + std::count(text->begin(), text->begin() + first, '\n');
  if (line.find("\"hash_ids\"") != std::string::npos) return ParseMooncakeTrace(*text, path);
  if (line.find("\"session_id\"") != std::string::npos) return ParseSessionTrace(*text, path);
  return absl::InvalidArgumentError(absl::StrCat(
      path, ":", line_no,
      ": unknown trace format (expected Mooncake 'hash_ids' or session 'session_id')"));
}

}  // namespace tandem::cache
