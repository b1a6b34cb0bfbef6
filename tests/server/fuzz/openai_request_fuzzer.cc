// libFuzzer target for the OpenAI API's request bodies and tool-call parsing: the input is a
// request body (readable seeds in tests/data/fuzz/openai_request), read as a chat completion and
// as a completion (with the hermes tool-call format), whose forced tool choice, if any, is
// compiled to its grammar; then the same bytes are read as a model's output in every tool-call
// format, whole and streamed in pieces, which must agree. Any answer is fine; a crash, a
// sanitizer report, a hang or a disagreement is not. Run e.g.
//   build/fuzz/openai_request_fuzzer -max_total_time=60 CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/openai/openai_request.h"
#include "server/tools/forced_tool_calls.h"
#include "server/tools/tool_calls.h"

namespace {

using tandem::server::ToolCallFormat;

void CheckStreamAgrees(ToolCallFormat format, const nlohmann::json& tools, std::string_view text) {
  const tandem::server::ToolCallPiece whole = tandem::server::ParseToolCalls(format, tools, text);
  tandem::server::ToolCallStream stream(format, tools);
  std::string content;
  size_t calls = 0;
  // Pieces of varying length, drawn from the text itself.
  size_t at = 0;
  for (size_t i = 0; at < text.size(); ++i) {
    const size_t step = 1 + static_cast<unsigned char>(text[i % text.size()]) % 9;
    for (const tandem::server::ToolCallPiece& piece : stream.Feed(text.substr(at, step))) {
      content += piece.content;
      calls += piece.calls.size();
    }
    at += step;
  }
  tandem::server::ToolCallPiece rest = stream.Finish();
  content += rest.content;
  calls += rest.calls.size();
  if (content != whole.content || calls != whole.calls.size()) {
    std::fprintf(stderr, "stream and whole parse disagree (format %d)\n", static_cast<int>(format));
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  tandem::server::OpenAiRequestOptions options;
  options.model_name = "m";
  options.tool_call_format = ToolCallFormat::kHermes;
  nlohmann::json tools;
  absl::StatusOr<tandem::server::OpenAiRequest> chat =
      tandem::server::ParseChatCompletionRequest(body, options);
  if (chat.ok() && chat->tool_use.parse) {
    tools = nlohmann::json::parse(chat->tool_use.tools.dump());
    if (chat->tool_use.forced) {
      (void)tandem::server::ForcedToolCallGrammar(ToolCallFormat::kHermes, chat->tool_use.tools,
                                                  chat->tool_use.only, chat->tool_use.parallel);
      (void)tandem::server::ForcedToolCallGrammar(ToolCallFormat::kJamba, chat->tool_use.tools,
                                                  chat->tool_use.only, chat->tool_use.parallel);
    }
  }
  (void)tandem::server::ParseCompletionRequest(body, options);
  for (ToolCallFormat format :
       {ToolCallFormat::kHermes, ToolCallFormat::kJamba, ToolCallFormat::kNemotronJson,
        ToolCallFormat::kXmlFunction}) {
    CheckStreamAgrees(format, tools, body);
  }
  return 0;
}
