#include "server/openai/live_request.h"

#include <utility>

#include "server/grpc/admission.h"

namespace tandem::server {

absl::StatusOr<std::unique_ptr<LiveRequest>> LiveRequest::Admit(ServiceState& state,
                                                                const std::string& caller,
                                                                engine::Request request) {
  if (absl::Status slot = TakeStreamSlot(state); !slot.ok()) return slot;
  std::string request_id;
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
      SubmitForCaller(state, caller, &request_id, std::move(request));
  if (!stream.ok()) return stream.status();
  return std::unique_ptr<LiveRequest>(
      new LiveRequest(state, caller, std::move(request_id), *std::move(stream)));
}

LiveRequest::~LiveRequest() { Release(); }

void LiveRequest::Release() {
  if (released_) return;
  released_ = true;
  if (!stream_->finished()) state_.engine().Cancel(stream_->id());
  state_.ReleaseId(caller_, request_id_);
  state_.ReleaseStream();
}

std::optional<engine::Event> LiveRequest::Next(const std::function<bool()>& abandoned) {
  engine::Event event;
  for (;;) {
    // Looked at between events too: a request whose tokens keep coming never waits a whole
    // interval, and its client may still have left.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check_ >= kPollInterval) {
      last_check_ = now;
      if (abandoned()) return std::nullopt;
    }
    bool timed_out = false;
    if (stream_->NextFor(kPollInterval, &event, &timed_out)) break;
    if (!timed_out) return std::nullopt;  // the finish event was already taken
  }
  if (event.kind == engine::Event::Kind::kTokens) {
    state_.metrics().ObserveTokenGaps(event, &last_token_seconds_);
  } else if (event.kind == engine::Event::Kind::kFinished) {
    Release();
  }
  return event;
}

std::optional<engine::Event> LiveRequest::Cancel() {
  state_.engine().Cancel(stream_->id());
  engine::Event event;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < give_up) {
    bool timed_out = false;
    if (stream_->NextFor(kPollInterval, &event, &timed_out)) {
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
