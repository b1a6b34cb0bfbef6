// The answer to an admitted completion, written as the engine produces it: whole (one JSON
// object once every choice finished) or streamed (Server-Sent Events, one per engine event of
// any choice, each flushed at once, then "data: [DONE]"). A client that hangs up or stops
// reading has its request cancelled; an engine error becomes an OpenAI error (the status, or an
// error event once the stream began).
#ifndef TANDEM_SERVER_OPENAI_COMPLETION_ANSWER_H_
#define TANDEM_SERVER_OPENAI_COMPLETION_ANSWER_H_

#include <vector>

#include "absl/status/status.h"
#include "engine/request.h"
#include "server/http/http_response_writer.h"
#include "server/metrics/request_metrics.h"
#include "server/openai/choice_streams.h"
#include "server/openai/openai_response.h"

namespace tandem::server {

// How the call ended, for the records: OK, CANCELLED (the client left or stopped reading) or
// the engine's error (the first a choice ended with); and the finish events that came, one per
// choice at most.
struct CallOutcome {
  absl::Status status;
  std::vector<engine::Event> finished;
};

CallOutcome AnswerWhole(ChoiceStreams& request, const CompletionShape& shape,
                        HttpResponseWriter& writer);
CallOutcome AnswerStreamed(ChoiceStreams& request, const CompletionShape& shape,
                           HttpResponseWriter& writer, RequestMetrics& metrics);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_COMPLETION_ANSWER_H_
