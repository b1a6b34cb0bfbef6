#include "server/openai/completion_answer.h"

#include <optional>
#include <string>
#include <utility>

#include "server/grpc/event_conversion.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_logprobs.h"
#include "server/tools/tool_calls.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

// The client went away (or the server is stopping) before the request finished: the request is
// cancelled, and its finish event, if the engine sends one in time, is recorded as such.
CallOutcome Abandoned(LiveRequest& request, absl::Status why) {
  return CallOutcome{std::move(why), request.Cancel()};
}

absl::Status Gone() { return absl::CancelledError("the client closed the connection"); }

}  // namespace

CallOutcome AnswerWhole(LiveRequest& request, const CompletionShape& shape,
                        HttpResponseWriter& writer) {
  std::string text;
  OpenAiLogprobs logprobs(shape.chat, shape.tokenizer, shape.skip_special_tokens);
  for (;;) {
    std::optional<engine::Event> event = request.Next([&] { return writer.Abandoned(); });
    if (!event) return Abandoned(request, Gone());
    text += event->text;  // a finish event's text is what was held back until the end
    logprobs.Add(*event);
    if (event->kind != engine::Event::Kind::kFinished) continue;
    CallOutcome outcome{FinishStatus(*event), std::move(event)};
    HttpResponse response =
        outcome.status.ok()
            ? JsonResponse(200, CompletionJson(shape, text, *outcome.finished,
                                               shape.logprobs ? logprobs.Take() : nullptr))
            : ErrorResponse(ErrorFromStatus(outcome.status));
    response.headers.emplace_back("X-Request-Id", request.request_id());
    (void)writer.Send(std::move(response));  // finished either way; a client that left is gone
    return outcome;
  }
}

CallOutcome AnswerStreamed(LiveRequest& request, const CompletionShape& shape,
                           HttpResponseWriter& writer, RequestMetrics& metrics) {
  HttpResponse head;
  head.content_type = "text/event-stream";
  head.headers = {{"Cache-Control", "no-cache"},
                  {"X-Accel-Buffering", "no"},  // proxies (nginx) must not buffer the events
                  {"X-Request-Id", request.request_id()}};
  absl::Status io = writer.StartStream(std::move(head));
  // The chat stream opens with the assistant's role, as OpenAI's does.
  if (io.ok() && shape.chat) io = writer.Write(SseEvent(ChunkJson(shape, "", true, nullptr)));
  std::optional<engine::Event> finished;
  OpenAiLogprobs logprobs(shape.chat, shape.tokenizer, shape.skip_special_tokens);
  // A chunk's logprobs are its tokens' (an empty list when its text was held back from tokens
  // an earlier chunk carried).
  auto chunk_logprobs = [&]() -> json { return shape.logprobs ? logprobs.Take() : nullptr; };
  // A chat with tools: calls are sent whole, as their blocks end; content as it comes.
  std::optional<ToolCallStream> tool_calls;
  if (shape.chat && shape.tool_call_format != ToolCallFormat::kNone) {
    tool_calls.emplace(shape.tool_call_format, shape.tools);
  }
  size_t calls_sent = 0;
  // The events of new text (`final`: the last of the answer), in the order it was written.
  auto chunks = [&](const std::string& text, bool final) {
    std::vector<ToolCallPiece> pieces;
    if (tool_calls) {
      pieces = tool_calls->Feed(text);
      if (final) pieces.push_back(tool_calls->Finish());
    } else {
      pieces.push_back(ToolCallPiece{text, {}});
    }
    std::string events;
    for (const ToolCallPiece& piece : pieces) {
      if (!piece.content.empty() || !logprobs.empty()) {
        events += SseEvent(ChunkJson(shape, piece.content, false, nullptr, chunk_logprobs()));
      }
      if (!piece.calls.empty()) {
        events += SseEvent(ToolCallChunkJson(shape, piece.calls, static_cast<int>(calls_sent)));
        calls_sent += piece.calls.size();
      }
    }
    return events;
  };
  while (io.ok()) {
    std::optional<engine::Event> event = request.Next([&] { return writer.Abandoned(); });
    if (!event) return Abandoned(request, Gone());
    if (event->kind == engine::Event::Kind::kFinished) {
      finished = std::move(event);
      break;
    }
    logprobs.Add(*event);
    // Text may lag its tokens (a partial character or stop string, or a tool call's block):
    // nothing to send yet, unless the tokens' logprobs are.
    if (std::string events = chunks(event->text, /*final=*/false); !events.empty()) {
      io = writer.Write(events);
    }
  }
  if (!io.ok()) {
    if (absl::IsDeadlineExceeded(io)) {
      metrics.CountStreamStall();
      return Abandoned(
          request,
          absl::CancelledError("the client read nothing for the server's write stall timeout"));
    }
    return Abandoned(request, Gone());
  }
  CallOutcome outcome{FinishStatus(*finished), std::move(finished)};
  const engine::Event& last = *outcome.finished;
  std::string tail;
  if (!outcome.status.ok()) {
    tail = SseEvent(ErrorJson(ErrorFromStatus(outcome.status)));
  } else {
    logprobs.Add(last);
    tail += chunks(last.text, /*final=*/true);
    tail += SseEvent(ChunkJson(shape, "", false, ChatFinishReason(last.finish_reason, calls_sent)));
    if (shape.usage_in_chunks) tail += SseEvent(UsageChunkJson(shape, last.usage));
  }
  tail += kSseDone;
  (void)writer.Write(tail);  // the request is over either way
  return outcome;
}

}  // namespace tandem::server
