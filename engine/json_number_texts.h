// JSON parsed with each fractional or out-of-range number's text kept beside its value.
//
// nlohmann keeps integers exactly (int64/uint64) but any other number only as the nearest
// double: 1e-400 becomes 0, an integer above 2^64 loses its low digits. A schema's bounds and
// constants must mean what the client wrote (json_number_range.h compares decimals exactly), so
// the parse also records, by JSON pointer (RFC 6901), the text of every number stored as a
// double.
#ifndef TANDEM_ENGINE_JSON_NUMBER_TEXTS_H_
#define TANDEM_ENGINE_JSON_NUMBER_TEXTS_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {

struct JsonWithNumberTexts {
  nlohmann::ordered_json value;                     // as nlohmann::ordered_json::parse gives it
  std::map<std::string, std::string> number_texts;  // pointer ("/a/0") -> text ("1e-400")
};

// INVALID_ARGUMENT with the parser's message when `text` is not JSON.
absl::StatusOr<JsonWithNumberTexts> ParseJsonWithNumberTexts(std::string_view text);

// `value`, found at `pointer` of the parsed document, as compact JSON text whose numbers are
// written as the document wrote them where their values are doubles.
std::string DumpWithNumberTexts(const nlohmann::ordered_json& value, const std::string& pointer,
                                const std::map<std::string, std::string>& number_texts);

// A key as one segment of a JSON pointer ('~' as "~0", '/' as "~1").
std::string PointerSegment(std::string_view key);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_JSON_NUMBER_TEXTS_H_
