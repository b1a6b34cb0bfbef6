// One turn of `tandem chat`: send the conversation as a Chat call, hand each piece of the
// answer's text (and of a reasoning model's reasoning, which the server splits off) on as it
// arrives, and measure what the user waited for.
#ifndef TANDEM_SERVER_CLI_CHAT_TURN_H_
#define TANDEM_SERVER_CLI_CHAT_TURN_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "grpcpp/grpcpp.h"
#include "server/client/connection.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::cli {

struct ChatTurnResult {
  grpc::Status status;
  std::string text;       // the whole answer (chunks' text, then Complete's)
  std::string reasoning;  // the whole reasoning, the same way (Chunk.reasoning)
  // Client-measured, from sending the call: to the first chunk with a token, and to the last.
  std::optional<double> first_token_seconds;
  double last_token_seconds = 0;
  int64_t tokens = 0;  // counted from the chunks
  bool has_complete = false;
  v1::Complete complete;  // usage, finish reason, server timings
};

ChatTurnResult RunChatTurn(const client::Connection& connection, const v1::ChatRequest& request,
                           std::optional<std::chrono::milliseconds> timeout,
                           const std::function<void(std::string_view)>& on_text,
                           const std::function<void(std::string_view)>& on_reasoning = {});

// "ttft 41 ms · 16 tokens · 210.3 tok/s · prompt 57 tokens, 40 cached · length": decode speed
// is tokens after the first over the time from the first to the last.
std::string DescribeTurn(const ChatTurnResult& turn);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_CHAT_TURN_H_
