// Reading the JSON files of a checkpoint directory. Python's json module writes non-finite floats
// as the bare words Infinity, -Infinity and NaN (transformers' Mamba2 config stores
// "time_step_limit": [0.0, Infinity]); strict JSON parsers reject them, so they are accepted here.
#ifndef TANDEM_MODELS_JSON_FILE_H_
#define TANDEM_MODELS_JSON_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tandem::models {

// Parses JSON text, accepting Python's Infinity / -Infinity (read as ±DBL_MAX) and NaN (read as
// null) outside strings. `source`
// names the file in errors, which also give the byte offset of a syntax error.
absl::StatusOr<nlohmann::json> ParseJsonText(std::string_view text, const std::string& source);

// Reads and parses a file; a missing or unreadable file is NOT_FOUND naming the path.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_JSON_FILE_H_
