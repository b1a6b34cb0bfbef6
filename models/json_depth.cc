#include "models/json_depth.h"

#include <algorithm>

namespace tandem::models {

int JsonDepth(std::string_view text, int limit) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace tandem::models
