#include "engine/reasoning_tokens.h"

#include <algorithm>

namespace tandem::engine {

std::optional<int64_t> CountReasoningTokens(const ReasoningBlock& block,
                                            std::span<const int32_t> output) {
  size_t from = 0;  // where the block's end is looked for
  if (!block.opened) {
    if (block.start_token < 0) return std::nullopt;  // whether a block starts is not known
    if (output.empty() || output.front() != block.start_token) return 0;
    from = 1;
  }
  if (block.end_token < 0) return std::nullopt;  // where it ends is not known
  const auto end = std::find(output.begin() + from, output.end(), block.end_token);
  return end == output.end() ? static_cast<int64_t>(output.size())
                             : static_cast<int64_t>(end - output.begin()) + 1;
}

}  // namespace tandem::engine
