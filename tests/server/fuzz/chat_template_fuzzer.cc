// libFuzzer target for the chat template engine: the input is a template, rendered against a
// fixed chat context under tight limits. Build with clang and -DTANDEM_FUZZ=ON, then e.g.
//   build/fuzz/chat_template_fuzzer -max_total_time=60 tests/data/chat_templates/templates
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/chat_template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json* context =
      new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
        "messages": [{"role": "system", "content": "sys"},
                     {"role": "user", "content": "hi \u00e9"},
                     {"role": "assistant", "content": null,
                      "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                     {"role": "tool", "content": "42"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true})"));
  tandem::chat_template::RenderLimits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_loop_iterations = 10000;
  limits.max_work = 1 << 22;
  auto tmpl = tandem::ChatTemplate::Parse(std::string(reinterpret_cast<const char*>(data), size));
  if (tmpl.ok()) (void)tmpl->Render(*context, limits);
  return 0;
}
