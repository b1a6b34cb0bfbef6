#include "server/openai/live_request.h"

#include <utility>

#include "models/status_macros.h"
#include "server/grpc/admission.h"

namespace tandem::server {

absl::StatusOr<std::vector<std::unique_ptr<LiveRequest>>> LiveRequest::AdmitChoices(
    ServiceState& state, const std::string& caller, std::vector<engine::Request> requests,
    int32_t n) {
  const auto total = static_cast<int32_t>(requests.size()) * n;
  TANDEM_RETURN_IF_ERROR(TakeStreamSlot(state, total));  // all at once or none
  std::vector<std::unique_ptr<LiveRequest>> live;
  for (size_t r = 0; r < requests.size(); ++r) {
    absl::StatusOr<std::vector<SubmittedChoice>> choices =
        SubmitChoicesForCaller(state, caller, "", std::move(requests[r]), n, ChoiceIds::kOneEach);
    if (!choices.ok()) {
      // That request gave its slots back; the later ones' go too, and `live` cancels the
      // requests submitted before it and frees their slots as it goes.
      state.ReleaseStream(static_cast<int64_t>(requests.size() - r - 1) * n);
      return choices.status();
    }
    for (SubmittedChoice& choice : *choices) {
      live.push_back(std::unique_ptr<LiveRequest>(
          new LiveRequest(state, caller, std::move(choice.request_id), std::move(choice.stream))));
    }
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
