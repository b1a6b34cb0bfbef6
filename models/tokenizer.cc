#include "models/tokenizer.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "models/hf_bpe_tokenizer.h"
#include "models/tokenizer_sentencepiece.h"

namespace tandem::models {

std::string CleanUpTokenizationSpaces(std::string_view text) {
  // One pattern at a time, in this order, as Python's chained str.replace does.
  static constexpr std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string out(text);
  for (const auto& [from, to] : kRules) out = absl::StrReplaceAll(out, {{from, to}});
  return out;
}

bool Touches(absl::Span<const TextRange> ranges, size_t begin, size_t end) {
  for (const TextRange& r : ranges) {
    if (r.begin >= end) return false;
    if (r.end > begin && r.begin < r.end) return true;
  }
  return false;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeWithPlainRanges(
    std::string_view text, absl::Span<const TextRange> plain, bool add_special_tokens) const {
  size_t previous_end = 0;
  for (const TextRange& r : plain) {
    if (r.begin < previous_end || r.end < r.begin || r.end > text.size()) {
      return absl::InvalidArgumentError(absl::StrCat("plain-text range [", r.begin, ", ", r.end,
                                                     ") is out of order or outside the ",
                                                     text.size(), "-byte text"));
    }
    previous_end = r.end;
  }
  return EncodeRanges(text, plain, add_special_tokens);
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeRanges(std::string_view text,
                                                             absl::Span<const TextRange> plain,
                                                             bool add_special_tokens) const {
  if (plain.empty()) return Encode(text, add_special_tokens);
  return absl::FailedPreconditionError("this tokenizer cannot encode text as plain text");
}

std::vector<int32_t> SpecialTokenIds(const Tokenizer& tokenizer,
                                     absl::Span<const std::string_view> pieces) {
  std::vector<int32_t> ids;
  for (std::string_view piece : pieces) {
    if (piece.empty()) continue;
    const int32_t id = tokenizer.PieceToId(piece);
    if (id >= 0 && id != tokenizer.unk_id() && tokenizer.IsSpecial(id)) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(model_dir);
  const fs::path json_path = dir / "tokenizer.json";
  const fs::path model_path = dir / "tokenizer.model";
  const fs::path config_path = dir / "tokenizer_config.json";
  TokenizerConfig config;
  if (fs::exists(config_path, ec)) {
    absl::StatusOr<TokenizerConfig> read = ReadTokenizerConfig(config_path.string());
    if (!read.ok()) return read.status();
    config = *std::move(read);
  }
  if (fs::exists(json_path, ec)) return LoadHfBpeTokenizer(json_path.string(), config);
  if (fs::exists(model_path, ec)) return LoadSentencePieceTokenizer(model_path.string(), config);
  return absl::NotFoundError(
      absl::StrCat(model_dir, ": neither tokenizer.json nor tokenizer.model found"));
}

}  // namespace tandem::models
