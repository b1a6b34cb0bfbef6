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
