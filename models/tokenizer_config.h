// The parts of a checkpoint's tokenizer_config.json that tokenization needs.
#ifndef TANDEM_MODELS_TOKENIZER_CONFIG_H_
#define TANDEM_MODELS_TOKENIZER_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tandem::models {

struct TokenizerConfig {
  // Unset when the file does not say; the tokenizer's own default then applies.
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  // Whether transformers' decode applies CleanUpTokenizationSpaces (tokenizer.h).
  std::optional<bool> clean_up_tokenization_spaces;
  // Token strings ("<s>"); empty when not given. Given either as a string or as an
  // {"content": ...} object.
  std::string bos_token;
  std::string eos_token;
  std::string pad_token;
  std::string unk_token;
  // The Jinja chat template ("default" entry when a list of named templates), kept for the
  // chat renderer; empty when absent.
  std::string chat_template;
  // added_tokens_decoder: id -> (content, special).
  struct AddedToken {
    std::string content;
    bool special = false;
  };
  std::map<int32_t, AddedToken> added_tokens;
};

// Parses tokenizer_config.json at `path`. Errors (unreadable, bad JSON, wrong field types) name
// the file.
absl::StatusOr<TokenizerConfig> ReadTokenizerConfig(const std::string& path);

// Reads and parses a tokenizer JSON file; NOT_FOUND / INVALID_ARGUMENT errors name the path.
absl::StatusOr<nlohmann::json> ReadTokenizerJson(const std::string& path);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_TOKENIZER_CONFIG_H_
