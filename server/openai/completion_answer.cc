#include "server/openai/completion_answer.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

std::vector<engine::Event> Collected(std::vector<std::optional<engine::Event>> finished) {
  std::vector<engine::Event> events;
  for (std::optional<engine::Event>& event : finished) {
    if (event) events.push_back(*std::move(event));
  }
  return events;
}

// The call ends before every choice finished (the client went away, the server is stopping, or
// a choice failed): the choices still running are cancelled, and their finish events, if the
// engine sends them in time, are recorded as such.
CallOutcome Ended(ChoiceStreams& request, std::vector<std::optional<engine::Event>> finished,
                  absl::Status why) {
  request.Cancel(&finished);
  return CallOutcome{std::move(why), Collected(std::move(finished))};
}

absl::Status Gone() { return absl::CancelledError("the client closed the connection"); }

// A whole answer's choice's "logprobs", from the events that carry them (an echo's prompt
// scores on the first).
json SpelledLogprobs(const CompletionShape& shape, size_t choice,
                     const std::vector<engine::Event>& scored) {
  OpenAiLogprobs spelled(shape.chat, shape.tokenizer, shape.skip_special_tokens);
  if (shape.echo) {
    static const std::vector<std::vector<engine::TopLogprob>> kNone;
    spelled.AddPrompt(shape.prompt_of(choice).tokens,
                      scored.empty() ? kNone : scored.front().prompt_logprobs);
  }
  for (const engine::Event& event : scored) spelled.Add(event);
  return spelled.Take();
}

}  // namespace

CallOutcome AnswerWhole(ChoiceStreams& request, const CompletionShape& shape,
                        HttpResponseWriter& writer) {
  struct Choice {
    std::string text;
    // With logprobs: the events that carry them, spelled out only for the choices the answer
    // lists (best_of drops the others).
    std::vector<engine::Event> scored;
    double logprob_sum = 0;  // of the chosen tokens (best_of ranks by their mean)
    int64_t tokens = 0;
    bool echoed = false;
  };
  std::vector<Choice> choices(request.size());
  std::vector<std::optional<engine::Event>> finished(request.size());
  absl::Status status;  // a choice's failure, which is the answer
  while (status.ok() && !request.all_finished()) {
    std::optional<ChoiceStreams::ChoiceEvent> next =
        request.Next([&] { return writer.Abandoned(); });
    if (!next) return Ended(request, std::move(finished), Gone());
    Choice& choice = choices[next->choice];
    if (shape.echo && !std::exchange(choice.echoed, true)) {
      choice.text = shape.prompt_of(next->choice).text;
    }
    choice.text += next->event.text;  // a finish event's text is what was held back until the end
    for (const std::vector<engine::TopLogprob>& entry : next->event.logprobs) {
      if (!entry.empty()) choice.logprob_sum += entry.front().logprob;  // the chosen token's
    }
    choice.tokens += static_cast<int64_t>(next->event.tokens.size());
    // The choice's first event carries the prompt's logprobs (when scored). What is kept moves
    // out: a finish event goes on to `finished` with its usage and reason only.
    if (shape.logprobs && (!next->event.logprobs.empty() || !next->event.prompt_logprobs.empty())) {
      engine::Event& kept = choice.scored.emplace_back();
      kept.tokens = std::move(next->event.tokens);
      kept.logprobs = std::move(next->event.logprobs);
      kept.prompt_logprobs = std::move(next->event.prompt_logprobs);
    }
    if (next->event.kind == engine::Event::Kind::kFinished) {
      status = FinishStatus(next->event);
      finished[next->choice] = std::move(next->event);
    }
  }
  HttpResponse response;
  CallOutcome outcome;
  if (status.ok()) {
    outcome = CallOutcome{status, Collected(std::move(finished))};
    // Which choices the answer lists, in its order: all, or each prompt's best_of's best, the
    // prompts in order.
    const auto per_prompt = static_cast<size_t>(shape.choices_per_prompt);
    // A candidate without tokens, or with a NaN (from NaN logits), ranks last: the sort needs a
    // strict order, and neither is a likely answer.
    auto mean = [&](size_t i) {
      const double value =
          choices[i].tokens > 0 ? choices[i].logprob_sum / choices[i].tokens : std::nan("");
      return std::isnan(value) ? -std::numeric_limits<double>::infinity() : value;
    };
    std::vector<size_t> listed;
    for (size_t first = 0; first < choices.size(); first += per_prompt) {
      std::vector<size_t> group;
      for (size_t i = first; i < std::min(first + per_prompt, choices.size()); ++i) {
        group.push_back(i);
      }
      if (shape.keep_best > 0) {
        std::stable_sort(group.begin(), group.end(),
                         [&](size_t a, size_t b) { return mean(a) > mean(b); });
        group.resize(std::min(group.size(), static_cast<size_t>(shape.keep_best)));
      }
      listed.insert(listed.end(), group.begin(), group.end());
    }
    json list = json::array();
    for (size_t k = 0; k < listed.size(); ++k) {
      const Choice& choice = choices[listed[k]];
      list.push_back(
          ChoiceJson(shape, static_cast<int>(k), choice.text, outcome.finished[listed[k]],
                     shape.logprobs ? SpelledLogprobs(shape, listed[k], choice.scored) : nullptr));
    }
    response = JsonResponse(
        200, CompletionJson(shape, std::move(list), ChoicesUsage(outcome.finished, per_prompt)));
  } else {
    // The other choices would only run on for an answer that is an error.
    outcome = Ended(request, std::move(finished), status);
    response = ErrorResponse(ErrorFromStatus(status));
  }
  response.headers.emplace_back("X-Request-Id", request.request_id());
  (void)writer.Send(std::move(response));  // finished either way; a client that left is gone
  return outcome;
}

CallOutcome AnswerStreamed(ChoiceStreams& request, const CompletionShape& shape,
                           HttpResponseWriter& writer, RequestMetrics& metrics) {
  HttpResponse head;
  head.content_type = "text/event-stream";
  head.headers = {{"Cache-Control", "no-cache"},
                  {"X-Accel-Buffering", "no"},  // proxies (nginx) must not buffer the events
                  {"X-Request-Id", request.request_id()}};
  absl::Status io = writer.StartStream(std::move(head));
  // Each choice's stream opens with the assistant's role, as OpenAI's does.
  for (size_t i = 0; io.ok() && shape.chat && i < request.size(); ++i) {
    io = writer.Write(SseEvent(ChunkJson(shape, static_cast<int>(i), "", true, nullptr)));
  }
  struct Choice {
    int index;
    OpenAiLogprobs logprobs;
    // Reasoning and content as they come; with tools, calls whole, as their blocks end.
    AnswerStream answer;
    size_t calls_sent = 0;
    bool echoed = false;
  };
  std::vector<Choice> choices;
  for (size_t i = 0; i < request.size(); ++i) {
    choices.push_back(Choice{static_cast<int>(i),
                             OpenAiLogprobs(shape.chat, shape.tokenizer, shape.skip_special_tokens),
                             NewAnswerStream(shape), 0});
  }
  // The events of a choice's new text (`final`: the last of its answer), in the order it was
  // written. A chunk's logprobs are its tokens' (an empty list when its text was held back from
  // tokens an earlier chunk carried); tokens whose text is all held back send theirs alone.
  auto chunks = [&](Choice& choice, const std::string& text, bool final) {
    std::vector<AnswerPiece> pieces = choice.answer.Feed(text);
    if (final) {
      for (AnswerPiece& piece : choice.answer.Finish()) pieces.push_back(std::move(piece));
    }
    if (pieces.empty()) pieces.emplace_back();
    std::string events;
    for (const AnswerPiece& piece : pieces) {
      if (!piece.reasoning.empty() || !piece.content.empty() || !choice.logprobs.empty()) {
        events +=
            SseEvent(ChunkJson(shape, choice.index, piece.content, false, nullptr,
                               shape.logprobs ? choice.logprobs.Take() : nullptr, piece.reasoning));
      }
      if (!piece.calls.empty()) {
        events += SseEvent(ToolCallChunkJson(shape, choice.index, piece.calls,
                                             static_cast<int>(choice.calls_sent)));
        choice.calls_sent += piece.calls.size();
      }
    }
    return events;
  };
  std::vector<std::optional<engine::Event>> finished(request.size());
  absl::Status status;  // the first choice's failure
  while (io.ok() && !request.all_finished()) {
    std::optional<ChoiceStreams::ChoiceEvent> next =
        request.Next([&] { return writer.Abandoned(); });
    if (!next) return Ended(request, std::move(finished), Gone());
    Choice& choice = choices[next->choice];
    const engine::Event& event = next->event;
    std::string events;
    if (shape.echo && !std::exchange(choice.echoed, true)) {
      // The prompt goes first, in a chunk of its own, with its logprobs when scored (the
      // choice's first event carries them).
      const CompletionShape::EchoedPrompt& prompt = shape.prompt_of(next->choice);
      if (shape.logprobs) choice.logprobs.AddPrompt(prompt.tokens, event.prompt_logprobs);
      events += chunks(choice, prompt.text, /*final=*/false);
    }
    choice.logprobs.Add(event);
    if (event.kind == engine::Event::Kind::kFinished) {
      if (absl::Status failed = FinishStatus(event); !failed.ok()) {
        finished[next->choice] = std::move(next->event);
        status = failed;
        break;  // the stream ends with the error
      }
      events += chunks(choice, event.text, /*final=*/true);
      events += SseEvent(ChunkJson(shape, choice.index, "", false,
                                   ChatFinishReason(event.finish_reason, choice.calls_sent)));
      finished[next->choice] = std::move(next->event);
    } else {
      // Text may lag its tokens (a partial character or stop string, or a tool call's block):
      // nothing to send yet, unless the tokens' logprobs are.
      events += chunks(choice, event.text, /*final=*/false);
    }
    if (!events.empty()) io = writer.Write(events);
  }
  if (!io.ok()) {
    if (absl::IsDeadlineExceeded(io)) {
      metrics.CountStreamStall();
      return Ended(
          request, std::move(finished),
          absl::CancelledError("the client read nothing for the server's write stall timeout"));
    }
    return Ended(request, std::move(finished), Gone());
  }
  std::string tail;
  CallOutcome outcome;
  if (!status.ok()) {
    // The other choices are cancelled: the answer is the error.
    outcome = Ended(request, std::move(finished), status);
    tail = SseEvent(ErrorJson(ErrorFromStatus(status)));
  } else {
    outcome = CallOutcome{status, Collected(std::move(finished))};
    if (shape.usage_in_chunks) {
      tail += SseEvent(UsageChunkJson(
          shape, ChoicesUsage(outcome.finished, static_cast<size_t>(shape.choices_per_prompt))));
    }
  }
  tail += kSseDone;
  (void)writer.Write(tail);  // the request is over either way
  return outcome;
}

}  // namespace tandem::server
