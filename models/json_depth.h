// How deep JSON text nests, counted on the raw text before it is parsed: nlohmann's parser and
// everything that walks its result recurse, so untrusted JSON (a checkpoint's safetensors header,
// a client's request body) is measured first and refused when it nests too deep.
#ifndef TANDEM_MODELS_JSON_DEPTH_H_
#define TANDEM_MODELS_JSON_DEPTH_H_

#include <string_view>

namespace tandem::models {

// The deepest nesting of objects and arrays in `text` (brackets inside strings do not count),
// stopping early once it exceeds `limit`.
int JsonDepth(std::string_view text, int limit);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_JSON_DEPTH_H_
