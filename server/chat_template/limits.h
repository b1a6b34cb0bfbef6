// Bounds on what one rendering may cost. A chat template comes from a model's
// tokenizer_config.json, i.e. from whoever published the model, so it is untrusted input.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_LIMITS_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace tandem::chat_template {

struct RenderLimits {
  // Bytes of rendered text; also the largest string or container (by printed size) any
  // expression may build.
  size_t max_output_bytes = 16 << 20;
  // for-loop iterations plus macro calls, summed over the whole rendering (range() is
  // capped by it too), so neither long loops nor branching recursion can hang a render.
  int64_t max_loop_iterations = 1'000'000;
  // Nested macro calls.
  int max_call_depth = 64;
  // Nested statement and expression evaluation (macro bodies included), and nesting of the
  // lists and dicts a template builds or receives: bounds the native stack a render uses
  // (about 8 KiB per level under AddressSanitizer, far less in optimised builds).
  int max_nesting_depth = 256;
  // Bytes and elements built by concatenation, joins, repeats and filters, summed; stops
  // quadratic growth such as appending to a list inside a long loop.
  size_t max_work = size_t{1} << 28;
};

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_LIMITS_H_
