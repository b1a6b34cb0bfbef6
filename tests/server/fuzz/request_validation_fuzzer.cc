// libFuzzer target for request validation: the input is a GenerateRequest or a ChatRequest in
// protobuf text format (readable seeds in tests/data/fuzz/request_validation), turned into an
// engine request against the zamba2-tiny fixture (tokenizer and chat template) under small
// caps; a ChatRequest's tool_choice is read too, and its messages' text is parsed for calls as if
// the model had written it. Any answer is fine; a crash, a sanitizer report or a hang is not. Run
// e.g.
//   build/fuzz/request_validation_fuzzer -max_total_time=60 CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "google/protobuf/text_format.h"
#include "server/grpc/chat_answer.h"
#include "server/grpc/chat_tool_calls.h"
#include "server/grpc/request_validation.h"
#include "server/grpc/served_model.h"

namespace {

const tandem::server::ValidationContext& Context() {
  static const tandem::server::ValidationContext* context = [] {
    tandem::models::LoadOptions options;
    options.page_tokens = 16;
    auto served = tandem::server::ServedModel::Load(
        std::string(TANDEM_TEST_DATA) + "/models/zamba2-tiny", options);
    if (!served.ok()) {
      std::fprintf(stderr, "cannot load the fixture: %s\n", served.status().ToString().c_str());
      std::abort();
    }
    auto* c = new tandem::server::ValidationContext();
    c->model = new tandem::server::ServedModel(*std::move(served));
    c->limits.max_request_bytes = 4096;
    c->limits.max_prompt_tokens = 512;
    c->max_new_tokens_limit = 256;
    return c;
  }();
  return *context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  google::protobuf::TextFormat::Parser parser;
  tandem::v1::GenerateRequest generate;
  if (parser.ParseFromString(text, &generate)) {
    (void)tandem::server::BuildGenerateRequest(generate, Context());
  }
  tandem::v1::ChatRequest chat;
  if (parser.ParseFromString(text, &chat)) {
    (void)tandem::server::BuildChatRequest(chat, Context());
    absl::StatusOr<tandem::server::ToolUse> use = tandem::server::ReadChatToolUse(
        chat, tandem::server::ToolCallFormat::kHermes, Context().limits.max_request_bytes);
    if (use.ok() && use->parse) {
      tandem::server::ChatAnswer calls(std::nullopt, tandem::server::ToolCallFormat::kHermes,
                                       use->tools);
      tandem::v1::Chunk chunk;
      for (const tandem::v1::ChatMessage& message : chat.messages()) {
        calls.AddText(message.content(), &chunk);
      }
      tandem::v1::Complete complete;
      complete.set_finish_reason(tandem::v1::STOP);
      calls.Finish(&complete);
    }
  }
  return 0;
}
