#include "server/cli/perplexity_input.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::cli {

namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot open '", path, "'"));
  std::stringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(flag, ": cannot read '", path, "'"));
  return contents.str();
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& path, const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c) || c == ',') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end == i || end - i > 10 ||
        (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
         text[end] != ',')) {
      size_t word_end = i;
      while (word_end < text.size() && word_end - i < 20 &&
             !std::isspace(static_cast<unsigned char>(text[word_end])) && text[word_end] != ',') {
        ++word_end;
      }
      return absl::InvalidArgumentError(absl::StrCat("--ids-file '", path, "': entry ", ids.size(),
                                                     " ('", text.substr(i, word_end - i),
                                                     "' at byte ", i, ") is not a token id"));
    }
    const int64_t id = std::stoll(text.substr(i, end - i));
    if (id > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ids-file '", path, "': entry ", ids.size(), " (", id, ") is too large"));
    }
    ids.push_back(static_cast<int32_t>(id));
    i = end;
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> PlainTextPrefix(const models::Tokenizer* tokenizer,
                                                     const models::Model& model) {
  if (tokenizer == nullptr) {
    const int32_t bos = model.config().bos_token_id;
    if (bos >= 0 && bos < model.config().vocab_size) return std::vector<int32_t>{bos};
    return std::vector<int32_t>{};
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<int32_t> with, tokenizer->Encode("a", true));
  TANDEM_ASSIGN_OR_RETURN(const std::vector<int32_t> plain, tokenizer->Encode("a", false));
  const auto text = std::search(with.begin(), with.end(), plain.begin(), plain.end());
  if (plain.empty() || text == with.end()) return std::vector<int32_t>{};
  return std::vector<int32_t>(with.begin(), text);
}

std::string IdList(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) absl::StrAppend(&out, i > 0 ? ", " : "", ids[i]);
  return out + "]";
}

absl::StatusOr<std::vector<int32_t>> ReadScoredText(const std::optional<std::string>& text_file,
                                                    const std::optional<std::string>& ids_file,
                                                    const models::Tokenizer* tokenizer) {
  if (!text_file) {
    TANDEM_ASSIGN_OR_RETURN(const std::string contents, ReadWholeFile("--ids-file", *ids_file));
    return ParseIds(*ids_file, contents);
  }
  TANDEM_ASSIGN_OR_RETURN(const std::string contents, ReadWholeFile("--text-file", *text_file));
  absl::StatusOr<std::vector<int32_t>> encoded = tokenizer->Encode(contents, false);
  if (!encoded.ok()) {
    return absl::Status(encoded.status().code(), absl::StrCat("--text-file '", *text_file,
                                                              "': ", encoded.status().message()));
  }
  return encoded;
}

}  // namespace tandem::cli
