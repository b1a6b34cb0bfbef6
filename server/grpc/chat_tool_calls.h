// Tool calls in gRPC's Chat (ChatRequest.tool_choice, parallel_tool_calls): what a request asks
// of its tools, and its answer's calls moved out of the streamed text into Chunk.tool_calls and
// Complete.tool_calls, as the OpenAI API returns them (server/tools/ does the parsing and the
// forcing for both).
#ifndef TANDEM_SERVER_GRPC_CHAT_TOOL_CALLS_H_
#define TANDEM_SERVER_GRPC_CHAT_TOOL_CALLS_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "nlohmann/json.hpp"
#include "server/grpc/service_state.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_calls.h"
#include "server/tools/tool_use.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

// What the request asks of its tools in `format` (the server's). INVALID_ARGUMENT naming the
// field: tool_choice.mode, tool_choice.function (not one of the tools), a forcing choice without
// tools or format, or beside a sampling.json_schema / json_object; `max_bytes` bounds the tools'
// text as BuildChatVariables does.
absl::StatusOr<ToolUse> ReadChatToolUse(const v1::ChatRequest& request, ToolCallFormat format,
                                        int64_t max_bytes);

// The answer of a Chat whose calls are parsed, read as it streams.
class ChatToolCalls {
 public:
  ChatToolCalls(ToolCallFormat format, const nlohmann::ordered_json& tools);

  // New output text: what the model wrote around its calls goes to chunk->text, each call it
  // completes to chunk->tool_calls.
  void AddText(std::string_view text, v1::Chunk* chunk);
  // At the end: complete->text (what was held back) is read the same way, and what is still held
  // back goes to complete->text and complete->tool_calls. A STOP after calls becomes TOOL_CALLS.
  void Finish(v1::Complete* complete);

 private:
  // Appends `calls` with ids and their positions among the answer's calls.
  void AddCalls(const std::vector<ToolCall>& calls,
                google::protobuf::RepeatedPtrField<v1::ToolCall>* out);

  ToolCallStream stream_;
  int calls_ = 0;
};

// A Chat's engine request (BuildChatRequest) with what its tools ask (ToolCallSupport::Apply);
// `tool_calls` is set when the answer's calls are to be parsed, else left null.
absl::StatusOr<engine::Request> BuildChatWithTools(const v1::ChatRequest& request,
                                                   ServiceState& state,
                                                   std::unique_ptr<ChatToolCalls>* tool_calls);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_CHAT_TOOL_CALLS_H_
