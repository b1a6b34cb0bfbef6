#include "server/cli/chat_turn.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const char* FinishName(v1::FinishReason reason) {
  switch (reason) {
    case v1::LENGTH:
      return "length";
    case v1::STOP:
      return "stop";
    case v1::ABORTED:
      return "aborted";
    case v1::TOOL_CALLS:
      return "tool_calls";
    default:
      return "unspecified";
  }
}

}  // namespace

ChatTurnResult RunChatTurn(const client::Connection& connection, const v1::ChatRequest& request,
                           std::optional<std::chrono::milliseconds> timeout,
                           const std::function<void(std::string_view)>& on_text,
                           const std::function<void(std::string_view)>& on_reasoning) {
  ChatTurnResult result;
  auto reasoning = [&](const std::string& piece) {
    if (piece.empty()) return;
    result.reasoning += piece;
    if (on_reasoning) on_reasoning(piece);
  };
  std::unique_ptr<grpc::ClientContext> context = connection.NewContext(timeout);
  const Clock::time_point start = Clock::now();
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      connection.stub().Chat(context.get(), request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.has_chunk()) {
      const v1::Chunk& chunk = response.chunk();
      if (chunk.token_ids_size() > 0) {
        result.last_token_seconds = SecondsSince(start);
        if (!result.first_token_seconds) result.first_token_seconds = result.last_token_seconds;
        result.tokens += chunk.token_ids_size();
      }
      reasoning(chunk.reasoning());
      if (!chunk.text().empty()) {
        result.text += chunk.text();
        on_text(chunk.text());
      }
    } else if (response.has_complete()) {
      result.has_complete = true;
      result.complete = response.complete();
      reasoning(result.complete.reasoning());
      if (!result.complete.text().empty()) {
        result.text += result.complete.text();
        on_text(result.complete.text());
      }
    }
    // An `error` message is followed by the same status from Finish().
  }
  result.status = reader->Finish();
  return result;
}

std::string DescribeTurn(const ChatTurnResult& turn) {
  std::string line;
  if (turn.first_token_seconds) {
    absl::StrAppendFormat(&line, "ttft %.0f ms · ", *turn.first_token_seconds * 1000);
  }
  absl::StrAppend(&line, turn.tokens, turn.tokens == 1 ? " token" : " tokens");
  const double decode_seconds = turn.last_token_seconds - turn.first_token_seconds.value_or(0);
  if (turn.tokens > 1 && decode_seconds > 0) {
    absl::StrAppendFormat(&line, " · %.1f tok/s", (turn.tokens - 1) / decode_seconds);
  }
  if (turn.has_complete) {
    const v1::Usage& usage = turn.complete.usage();
    absl::StrAppend(&line, " · prompt ", usage.prompt_tokens(), " tokens, ", usage.cached_tokens(),
                    " cached · ", FinishName(turn.complete.finish_reason()));
    if (usage.preemptions() > 0) absl::StrAppend(&line, " · preempted ", usage.preemptions());
  }
  return line;
}

}  // namespace tandem::cli
