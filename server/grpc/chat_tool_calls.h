// Tool calls in gRPC's Chat (ChatRequest.tool_choice, parallel_tool_calls): what a request asks
// of its tools (chat_answer.h moves the answer's calls out of the streamed text; server/tools/
// does the parsing and the forcing for both APIs).
#ifndef TANDEM_SERVER_GRPC_CHAT_TOOL_CALLS_H_
#define TANDEM_SERVER_GRPC_CHAT_TOOL_CALLS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_use.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

// What the request asks of its tools in `format` (the server's). INVALID_ARGUMENT naming the
// field: tool_choice.mode, tool_choice.function (not one of the tools), a forcing choice without
// tools or format, or beside a sampling.json_schema / json_object; `max_bytes` bounds the tools'
// text as BuildChatVariables does.
absl::StatusOr<ToolUse> ReadChatToolUse(const v1::ChatRequest& request, ToolCallFormat format,
                                        int64_t max_bytes);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_CHAT_TOOL_CALLS_H_
