#include "server/openai/live_request.h"

#include <utility>

#include "models/status_macros.h"
#include "server/grpc/admission.h"

namespace tandem::server {

absl::StatusOr<std::vector<std::unique_ptr<LiveRequest>>> LiveRequest::AdmitChoices(
    ServiceState& state, const std::string& caller, engine::Request request, int32_t n) {
  TANDEM_RETURN_IF_ERROR(TakeStreamSlot(state, n));  // all at once or none
  TANDEM_ASSIGN_OR_RETURN(std::vector<SubmittedChoice> choices,
                          SubmitChoicesForCaller(state, caller, "", std::move(request), n));
  std::vector<std::unique_ptr<LiveRequest>> live;
  for (SubmittedChoice& choice : choices) {
    live.push_back(std::unique_ptr<LiveRequest>(
        new LiveRequest(state, caller, std::move(choice.request_id), std::move(choice.stream))));
  }
  return live;
}

LiveRequest::~LiveRequest() { Release(); }

void LiveRequest::Release() {
  if (released_) return;
  released_ = true;
  if (!stream_->finished()) state_.engine().Cancel(stream_->id());
  state_.ReleaseId(caller_, request_id_);
  state_.ReleaseStream();
}

std::optional<engine::Event> LiveRequest::TryNext() {
  engine::Event event;
  bool timed_out = false;
  if (!stream_->NextFor(std::chrono::milliseconds(0), &event, &timed_out)) return std::nullopt;
  if (event.kind == engine::Event::Kind::kTokens) {
    state_.metrics().ObserveTokenGaps(event, &last_token_seconds_);
  } else if (event.kind == engine::Event::Kind::kFinished) {
    Release();
  }
  return event;
}

void LiveRequest::SendCancel() { state_.engine().Cancel(stream_->id()); }

std::optional<engine::Event> LiveRequest::AwaitFinish(
    std::chrono::steady_clock::time_point give_up) {
  engine::Event event;
  while (std::chrono::steady_clock::now() < give_up) {
    bool timed_out = false;
    if (stream_->NextFor(std::chrono::milliseconds(50), &event, &timed_out)) {
      if (event.kind == engine::Event::Kind::kFinished) {
        Release();
        return event;
      }
    } else if (!timed_out) {
      break;  // the finish event was already taken
    }
  }
  return std::nullopt;
}

}  // namespace tandem::server
