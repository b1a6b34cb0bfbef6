// What `tandem perplexity` scores: the text of a file tokenized, or a file of ids, and the
// tokens each window starts with.
#ifndef TANDEM_SERVER_CLI_PERPLEXITY_INPUT_H_
#define TANDEM_SERVER_CLI_PERPLEXITY_INPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "models/tokenizer.h"

namespace tandem::cli {

// The tokens of --text-file (tokenized without special tokens; needs `tokenizer`) or of
// --ids-file (exactly one is given). Errors name the flag and the file.
absl::StatusOr<std::vector<int32_t>> ReadScoredText(const std::optional<std::string>& text_file,
                                                    const std::optional<std::string>& ids_file,
                                                    const models::Tokenizer* tokenizer);

// "1, 2 3\n4" -> {1, 2, 3, 4}: ids separated by commas or whitespace; anything else is named
// by its place (`path` names the file in the message).
absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& path, const std::string& text);

// What the tokenizer puts before plain text (usually just BOS): the ids Encode adds in front of
// a short text's own (a tokenizer that also appends an EOS keeps it to itself). Without a
// tokenizer, the checkpoint's BOS if it names one.
absl::StatusOr<std::vector<int32_t>> PlainTextPrefix(const models::Tokenizer* tokenizer,
                                                     const models::Model& model);

// "[1, 2]", "[]": how the prefix is reported.
std::string IdList(const std::vector<int32_t>& ids);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_PERPLEXITY_INPUT_H_
