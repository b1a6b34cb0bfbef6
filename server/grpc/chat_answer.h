// The answer of a gRPC Chat read as it streams, as the OpenAI API returns it: with a reasoning
// format, the model's reasoning goes to Chunk.reasoning and Complete.reasoning; with tools, each
// call it completes to Chunk.tool_calls (Complete.tool_calls); the rest stays Chunk.text
// (server/tools/answer_stream.h does the reading for both APIs).
#ifndef TANDEM_SERVER_GRPC_CHAT_ANSWER_H_
#define TANDEM_SERVER_GRPC_CHAT_ANSWER_H_

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "nlohmann/json.hpp"
#include "server/grpc/service_state.h"
#include "server/reasoning/reasoning_support.h"
#include "server/tools/answer_stream.h"
#include "server/tools/tool_call_format.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

class ChatAnswer {
 public:
  // Reasoning split off as `reasoning` says (nullopt: not split); calls parsed in `format`
  // (kNone: not parsed), typed by the request's `tools`.
  ChatAnswer(std::optional<ReasoningUse> reasoning, ToolCallFormat format,
             const nlohmann::ordered_json& tools);

  // New output text, read into `chunk`.
  void AddText(std::string_view text, v1::Chunk* chunk);
  // At the end: complete->text (what was held back) is read the same way, and what is still
  // held back goes to `complete`. A STOP after calls becomes TOOL_CALLS.
  void Finish(v1::Complete* complete);

 private:
  // Appends `calls` with ids and their positions among the answer's calls.
  void AddCalls(const std::vector<ToolCall>& calls,
                google::protobuf::RepeatedPtrField<v1::ToolCall>* out);

  AnswerStream stream_;
  int calls_ = 0;
};

// A Chat's engine request (BuildChatRequest) with what its tools ask (ToolCallSupport::Apply)
// and how its answer's reasoning is split (ReasoningSupport::Apply); `answer` is set when the
// answer is read for reasoning or calls, else left null.
absl::StatusOr<engine::Request> BuildChatCall(const v1::ChatRequest& request, ServiceState& state,
                                              std::unique_ptr<ChatAnswer>* answer);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_CHAT_ANSWER_H_
